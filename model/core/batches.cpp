#include "model/core/batches.hpp"

#include <algorithm>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

namespace baton::model {

void check_plan(const batch_plan& plan) {
  if (plan.batch_size <= 0 || plan.microbatches <= 0 || plan.epochs < 0)
    throw error("batch plan: expected batch_size > 0, microbatches > 0 and epochs >= 0, got " +
                std::to_string(plan.batch_size) + ", " + std::to_string(plan.microbatches) +
                ", " + std::to_string(plan.epochs));
}

epoch_plan plan_epoch(int64_t dataset_size, const batch_plan& plan, int32_t epoch) {
  check_plan(plan);
  const std::vector<int64_t> order = epoch_order(dataset_size, plan.seed, epoch);
  const auto n = static_cast<int64_t>(order.size());
  epoch_plan out;
  out.epoch = epoch;
  int32_t step = 0;
  for (int64_t begin = 0; begin < n; begin += plan.batch_size, ++step) {
    const int64_t size = std::min(plan.batch_size, n - begin);
    const auto parts = static_cast<int32_t>(std::min<int64_t>(plan.microbatches, size));
    // `parts` contiguous pieces; the first size % parts are one larger.
    int64_t at = begin;
    for (int32_t k = 0; k < parts; ++k) {
      const int64_t piece = size / parts + (k < size % parts ? 1 : 0);
      out.microbatches.emplace_back(order.begin() + at, order.begin() + at + piece);
      out.step_of.push_back(step);
      out.step_size_of.push_back(parts);
      at += piece;
    }
  }
  return out;
}

epoch_counts count_epoch(int64_t dataset_size, const batch_plan& plan) {
  check_plan(plan);
  const int64_t n = std::max<int64_t>(dataset_size, 0);
  const int64_t full = n / plan.batch_size;
  const int64_t rest = n % plan.batch_size;
  epoch_counts out;
  out.minibatches = full + (rest > 0 ? 1 : 0);
  // A minibatch is cut into min(microbatches, its size) pieces, as plan_epoch.
  out.microbatches = full * std::min<int64_t>(plan.microbatches, plan.batch_size) +
                     std::min<int64_t>(plan.microbatches, rest);
  return out;
}

std::vector<std::vector<int64_t>> plan_eval(int64_t dataset_size, int64_t batch_size) {
  if (batch_size <= 0)
    throw error("evaluation plan: expected batch_size > 0, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> out;
  for (int64_t begin = 0; begin < dataset_size; begin += batch_size) {
    std::vector<int64_t> ids;
    for (int64_t i = begin; i < std::min(dataset_size, begin + batch_size); ++i)
      ids.push_back(i);
    out.push_back(std::move(ids));
  }
  return out;
}

} // namespace baton::model

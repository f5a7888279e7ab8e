#include "actors/modes/data_parallel/ring_exchange.hpp"

#include <string>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

ring_exchange::ring_exchange(int32_t worker, int32_t workers)
    : worker_(worker), workers_(workers) {
  if (workers < 1 || worker < 0 || worker >= workers)
    throw model::error("ring: worker " + std::to_string(worker) + " of " +
                       std::to_string(workers) + ": expected 0 <= worker < workers");
}

int32_t ring_exchange::rounds() const {
  return static_cast<int32_t>(buckets_.size()) * 2 * (workers_ - 1);
}

ring_exchange::place ring_exchange::place_of(int32_t round, bool sending) const {
  const int32_t per_bucket = 2 * (workers_ - 1);
  place p;
  p.bucket = static_cast<size_t>(round / per_bucket);
  int32_t k = round % per_bucket;
  p.reduce = k < workers_ - 1;
  if (!p.reduce)
    k -= workers_ - 1;
  int32_t chunk = p.reduce ? (sending ? model::reduce_scatter_send_chunk(worker_, k, workers_)
                                      : model::reduce_scatter_receive_chunk(worker_, k, workers_))
                           : (sending ? model::all_gather_send_chunk(worker_, k, workers_)
                                      : model::all_gather_receive_chunk(worker_, k, workers_));
  p.chunk = chunks_[p.bucket][static_cast<size_t>(chunk)];
  return p;
}

ring_message ring_exchange::message(int32_t round) const {
  auto p = place_of(round, true);
  return {round, model::slice(buckets_[p.bucket], p.chunk).clone()};
}

std::optional<ring_message> ring_exchange::begin(std::vector<at::Tensor> buckets) {
  torch::NoGradGuard no_grad;
  buckets_.clear();
  chunks_.clear();
  for (auto& b : buckets) {
    // A copy: the sums must not write into the caller's tensors.
    buckets_.push_back(b.detach().reshape({-1}).clone());
    chunks_.push_back(model::ring_chunks(buckets_.back().numel(), workers_));
  }
  received_ = 0;
  if (rounds() == 0)
    return std::nullopt;
  return message(0);
}

std::optional<ring_message> ring_exchange::receive(const ring_message& m) {
  if (done() || m.round != received_)
    throw model::error("ring: worker " + std::to_string(worker_) + " got round " +
                       std::to_string(m.round) + ", expected " +
                       (done() ? std::string{"none (the step's exchange is over)"}
                               : std::to_string(received_)));
  auto p = place_of(m.round, false);
  if (!m.chunk.defined() || m.chunk.scalar_type() != at::kFloat || m.chunk.dim() != 1 ||
      m.chunk.numel() != p.chunk.size())
    throw model::error("ring: worker " + std::to_string(worker_) + " got a chunk of round " +
                       std::to_string(m.round) + " that is not " +
                       std::to_string(p.chunk.size()) + " float32 values");
  torch::NoGradGuard no_grad;
  auto own = model::slice(buckets_[p.bucket], p.chunk);
  if (p.reduce)
    own.add_(m.chunk); // own + received, as ring_allreduce adds
  else
    own.copy_(m.chunk);
  received_ += 1;
  if (received_ == rounds())
    return std::nullopt;
  return message(received_);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

#include "actors/modes/data_parallel/ring_exchange.hpp"

#include <string>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

ring_exchange::ring_exchange(int32_t worker, int32_t workers)
    : worker_(worker), workers_(workers) {
  if (workers < 1 || worker < 0 || worker >= workers)
    throw model::error("ring: worker " + std::to_string(worker) + " of " +
                       std::to_string(workers) + ": expected 0 <= worker < workers");
}

int32_t ring_exchange::per_bucket() const {
  return swaps() ? 2 : 2 * (workers_ - 1);
}

int32_t ring_exchange::rounds() const {
  return static_cast<int32_t>(buckets_.size()) * per_bucket();
}

ring_exchange::place ring_exchange::place_of(int32_t round, bool sending) const {
  place p;
  p.bucket = static_cast<size_t>(round / per_bucket());
  int32_t k = round % per_bucket();
  if (swaps()) {
    p.chunk = chunks_[p.bucket][static_cast<size_t>(k)];
    p.last_reduce = true;
    return p;
  }
  p.reduce = k < workers_ - 1;
  p.last_reduce = k == workers_ - 2;
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
  return {round, model::slice(buckets_[p.bucket], p.chunk)};
}

void ring_exchange::start(const std::vector<int64_t>& sizes) {
  buckets_.assign(sizes.size(), at::Tensor());
  means_.clear();
  others_.assign(sizes.size(), {});
  chunks_.clear();
  for (int64_t size : sizes)
    chunks_.push_back(model::ring_chunks(size, workers_));
  put_ = 0;
  received_ = 0;
  kept_.clear();
}

std::vector<ring_message> ring_exchange::put(size_t b, at::Tensor values) {
  const std::string what = "ring: worker " + std::to_string(worker_) + ": bucket " +
                           std::to_string(b);
  if (b >= buckets_.size() || buckets_[b].defined())
    throw model::error(what + (b >= buckets_.size() ? " does not exist in this step"
                                                    : " was put twice"));
  const int64_t size = chunks_[b].empty() ? 0 : chunks_[b].back().end;
  if (!values.defined() || values.scalar_type() != at::kFloat || values.numel() != size)
    throw model::error(what + " is not " + std::to_string(size) + " float32 values");
  buckets_[b] = values.reshape({-1});
  put_ += 1;
  std::vector<ring_message> out;
  const auto first = static_cast<int32_t>(b) * per_bucket();
  if (swaps()) {
    out.push_back(message(first));
    out.push_back(message(first + 1));
  } else if (workers_ > 1) {
    out.push_back(message(first));
  }
  apply_kept(out);
  return out;
}

std::vector<ring_message> ring_exchange::begin(std::vector<at::Tensor> buckets) {
  std::vector<int64_t> sizes;
  for (const auto& b : buckets)
    sizes.push_back(b.numel());
  start(sizes);
  std::vector<ring_message> out;
  for (size_t b = 0; b < buckets.size(); ++b)
    for (auto& m : put(b, std::move(buckets[b])))
      out.push_back(std::move(m));
  return out;
}

std::vector<ring_message> ring_exchange::receive(ring_message m) {
  const std::string what = "ring: worker " + std::to_string(worker_) + " got round " +
                           std::to_string(m.round);
  if (m.round < received_ || m.round >= rounds() || kept_.count(m.round))
    throw model::error(what + ", expected one of rounds " + std::to_string(received_) +
                       " to " + std::to_string(rounds() - 1) + " not received yet");
  auto p = place_of(m.round, false);
  if (!m.chunk.defined() || m.chunk.scalar_type() != at::kFloat || m.chunk.dim() != 1 ||
      m.chunk.numel() != p.chunk.size())
    throw model::error(what + " with a chunk that is not " + std::to_string(p.chunk.size()) +
                       " float32 values");
  kept_.emplace(m.round, std::move(m.chunk));
  std::vector<ring_message> out;
  apply_kept(out);
  return out;
}

void ring_exchange::apply_kept(std::vector<ring_message>& out) {
  torch::NoGradGuard no_grad;
  for (auto it = kept_.find(received_); it != kept_.end(); it = kept_.find(received_)) {
    auto p = place_of(received_, false);
    if (!buckets_[p.bucket].defined())
      return; // its bucket is not here yet
    auto own = model::slice(buckets_[p.bucket], p.chunk);
    if (swaps()) {
      // Kept: the mean is taken where it is read (means(), or the optimizer
      // step's own pass), and the other worker reads this bucket meanwhile.
      others_[p.bucket].push_back({p.chunk, std::move(it->second)});
    } else if (p.last_reduce) {
      model::mean_of_two(own, it->second, workers_, own);
    } else if (p.reduce) {
      own.add_(it->second); // own + received, as ring_allreduce adds
    } else {
      own.copy_(it->second);
    }
    kept_.erase(it);
    received_ += 1;
    // A bucket's first round went out when it was put (both, when two
    // workers swap).
    if (!swaps() && received_ < rounds() && received_ % per_bucket() != 0)
      out.push_back(message(received_));
  }
}

const std::vector<at::Tensor>& ring_exchange::means() {
  if (!swaps())
    return buckets_; // reduced in place
  if (!done() || !means_.empty() || others_.size() != buckets_.size())
    return means_; // not yet, made already, or released
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    auto mean = at::empty_like(buckets_[b]);
    for (const auto& other : others_[b]) {
      auto into = model::slice(mean, other.range);
      model::mean_of_two(model::slice(buckets_[b], other.range), other.values, workers_, into);
    }
    means_.push_back(std::move(mean));
  }
  return means_;
}

void ring_exchange::release() {
  means_.clear();
  others_.clear();
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

#include "model/data_parallel/data_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/core/augment.hpp"
#include "model/core/best_weights.hpp"
#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/batches.hpp"
#include "model/core/non_finite.hpp"
#include "model/core/stage_trainer.hpp"
#include "model/core/vectorised.hpp"
#include "model/data_parallel/worker_lanes.hpp"

namespace baton::model {

// -- worker shares of an epoch ---------------------------------------------------

std::vector<int64_t> worker_share(int64_t dataset_size, uint64_t seed, int32_t epoch,
                                  int32_t worker, int32_t workers, remainder_policy remainder) {
  if (workers < 1 || worker < 0 || worker >= workers)
    throw error("worker " + std::to_string(worker) + " of " + std::to_string(workers) +
                ": expected 0 <= worker < workers");
  std::vector<int64_t> order = epoch_order(dataset_size, seed, epoch);
  const auto n = static_cast<int64_t>(order.size());
  if (remainder == remainder_policy::drop) {
    order.resize(static_cast<size_t>(n - n % workers));
  } else if (n > 0) {
    // DistributedSampler: repeat the order's start until W divides the length.
    const int64_t padded = (n + workers - 1) / workers * workers;
    for (int64_t i = n; i < padded; ++i)
      order.push_back(order[static_cast<size_t>((i - n) % n)]);
  }
  std::vector<int64_t> share;
  for (size_t i = static_cast<size_t>(worker); i < order.size(); i += static_cast<size_t>(workers))
    share.push_back(order[i]);
  return share;
}

std::vector<std::vector<int64_t>> worker_minibatches(const std::vector<int64_t>& share,
                                                     int64_t batch_size) {
  if (batch_size <= 0)
    throw error("data-parallel: expected batch_size > 0, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> out;
  for (size_t begin = 0; begin < share.size(); begin += static_cast<size_t>(batch_size))
    out.emplace_back(share.begin() + static_cast<std::ptrdiff_t>(begin),
                     share.begin() + static_cast<std::ptrdiff_t>(
                                         std::min(share.size(), begin + batch_size)));
  return out;
}

int64_t data_parallel_steps_per_epoch(int64_t dataset_size, int32_t workers,
                                      int64_t batch_size, remainder_policy remainder) {
  if (workers < 1 || batch_size <= 0)
    throw error("data-parallel: expected workers >= 1 and batch_size > 0");
  const int64_t n = std::max<int64_t>(dataset_size, 0);
  const int64_t share = remainder == remainder_policy::drop ? n / workers
                                                            : (n + workers - 1) / workers;
  return (share + batch_size - 1) / batch_size;
}

// -- the flat key space -----------------------------------------------------------

flat_layout make_flat_layout(const layered_model& m, size_t frozen_layers) {
  if (frozen_layers > m.size())
    throw error("flat layout: " + std::to_string(frozen_layers) + " frozen layers of a model of " +
                std::to_string(m.size()));
  flat_layout layout;
  layout.frozen_layers = frozen_layers;
  // One key per parameter, a tied one under its first layer (a parameter is
  // its storage): the frozen prefix holds it when that layer is frozen.
  for (const auto& p : m.parameter_table()) {
    if (p.tensor.scalar_type() != at::kFloat)
      throw error("flat layout: parameter '" + p.name + "' is not float32");
    parameter_key key;
    key.name = p.name;
    key.layer = p.layer;
    key.range = {layout.numel, layout.numel + p.tensor.numel()};
    key.shape = p.tensor.sizes().vec();
    const auto fixed = parameters_frozen_by_file(*m.layers()[p.layer].module.ptr());
    key.fixed = std::any_of(fixed.begin(), fixed.end(), [&](const at::Tensor& t) {
      return t.unsafeGetTensorImpl() == p.tensor.unsafeGetTensorImpl();
    });
    layout.numel = key.range.end;
    if (p.layer < frozen_layers)
      layout.frozen_numel = key.range.end;
    layout.keys.push_back(std::move(key));
  }
  return layout;
}

std::vector<key_range> shard_ranges(const flat_layout& layout, int32_t shards) {
  if (shards < 1)
    throw error("parameter shards: expected shards >= 1, got " + std::to_string(shards));
  return ring_chunks(layout.numel, shards); // the same equal cut
}

key_range trainable_part(const key_range& range, const flat_layout& layout) {
  const int64_t begin = std::max(range.begin, layout.frozen_numel);
  return {begin, std::max(begin, range.end)};
}

std::vector<size_t> keys_in(const key_range& range, const flat_layout& layout) {
  std::vector<size_t> out;
  for (size_t i = 0; i < layout.keys.size(); ++i) {
    const key_range& k = layout.keys[i].range;
    if (k.begin < range.end && range.begin < k.end)
      out.push_back(i);
  }
  return out;
}

std::vector<key_piece> key_pieces(const key_range& range, const flat_layout& layout) {
  std::vector<key_piece> pieces;
  for (size_t i : keys_in(range, layout)) {
    const key_range& key = layout.keys[i].range;
    const int64_t begin = std::max(key.begin, range.begin);
    const int64_t end = std::min(key.end, range.end);
    pieces.push_back({i, begin - key.begin, begin - range.begin, end - begin});
  }
  return pieces;
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors, const flat_layout& layout) {
  TORCH_CHECK(tensors.size() == layout.keys.size(), "flatten: ", tensors.size(),
              " tensors for ", layout.keys.size(), " keys");
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i)
    parts.push_back(tensors[i].defined() ? tensors[i].detach().reshape({-1})
                                         : torch::zeros({layout.keys[i].range.size()}));
  return parts.empty() ? torch::zeros({0}) : torch::cat(parts);
}

at::Tensor flatten_range(const std::vector<at::Tensor>& tensors, const flat_layout& layout,
                         const key_range& range, at::Tensor out) {
  TORCH_CHECK(tensors.size() == layout.keys.size(), "flatten_range: ", tensors.size(),
              " tensors for ", layout.keys.size(), " keys");
  torch::NoGradGuard no_grad;
  if (!out.defined())
    out = torch::empty({range.size()});
  TORCH_CHECK(out.numel() == range.size() && out.is_contiguous(), "flatten_range: ",
              out.numel(), " elements to write ", range.size());
  for (const auto& p : key_pieces(range, layout)) {
    auto into = out.narrow(0, p.in_range, p.size);
    if (tensors[p.key].defined())
      into.copy_(tensors[p.key].detach().reshape({-1}).narrow(0, p.in_key, p.size));
    else
      into.zero_(); // a parameter without a gradient counts as zeros
  }
  return out;
}

std::vector<at::Tensor> unflatten(const at::Tensor& flat, const flat_layout& layout) {
  std::vector<at::Tensor> out;
  for (const auto& key : layout.keys)
    out.push_back(slice(flat, key.range).clone().reshape(key.shape));
  return out;
}

at::Tensor slice(const at::Tensor& flat, const key_range& range) {
  return flat.narrow(0, range.begin, range.size());
}

void write_slice(at::Tensor& flat, const key_range& range, const at::Tensor& values) {
  TORCH_CHECK(values.numel() == range.size(), "write_slice: ", values.numel(),
              " values for a range of ", range.size());
  torch::NoGradGuard no_grad;
  flat.narrow(0, range.begin, range.size()).copy_(values.reshape({-1}));
}

// -- ring all-reduce ----------------------------------------------------------------

namespace {

int32_t modulo(int64_t a, int32_t n) { return static_cast<int32_t>(((a % n) + n) % n); }

void check_inputs(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty())
    throw error("all-reduce of no workers' vectors");
  for (const auto& t : inputs)
    if (t.numel() != inputs.front().numel())
      throw error("all-reduce: vectors of " + std::to_string(t.numel()) + " and " +
                  std::to_string(inputs.front().numel()) + " elements");
}

} // namespace

std::vector<key_range> ring_chunks(int64_t numel, int32_t workers) {
  if (workers < 1)
    throw error("ring: expected workers >= 1, got " + std::to_string(workers));
  std::vector<key_range> out;
  const int64_t base = numel / workers, extra = numel % workers;
  int64_t at = 0;
  for (int32_t c = 0; c < workers; ++c) {
    const int64_t size = base + (c < extra ? 1 : 0);
    out.push_back({at, at + size});
    at += size;
  }
  return out;
}

int32_t ring_next(int32_t worker, int32_t workers) { return modulo(worker + 1, workers); }
int32_t ring_previous(int32_t worker, int32_t workers) { return modulo(worker - 1, workers); }

int32_t reduce_scatter_send_chunk(int32_t worker, int32_t step, int32_t workers) {
  return modulo(static_cast<int64_t>(worker) - step, workers);
}
int32_t reduce_scatter_receive_chunk(int32_t worker, int32_t step, int32_t workers) {
  return modulo(static_cast<int64_t>(worker) - 1 - step, workers);
}
int32_t all_gather_send_chunk(int32_t worker, int32_t step, int32_t workers) {
  return modulo(static_cast<int64_t>(worker) + 1 - step, workers);
}
int32_t all_gather_receive_chunk(int32_t worker, int32_t step, int32_t workers) {
  return modulo(static_cast<int64_t>(worker) - step, workers);
}

int64_t ring_bytes_sent(int64_t numel, int64_t element_bytes, int32_t worker, int32_t workers) {
  if (workers <= 1)
    return 0;
  const auto chunks = ring_chunks(numel, workers);
  const int64_t skipped = chunks[static_cast<size_t>(modulo(worker + 1, workers))].size() +
                          chunks[static_cast<size_t>(modulo(worker + 2, workers))].size();
  return (2 * numel - skipped) * element_bytes;
}

double ring_bytes_theory(double bytes, int32_t workers) {
  return workers <= 1 ? 0.0 : 2.0 * (workers - 1) / workers * bytes;
}

at::Tensor ring_allreduce(const std::vector<at::Tensor>& inputs) {
  check_inputs(inputs);
  torch::NoGradGuard no_grad;
  const auto w_count = static_cast<int32_t>(inputs.size());
  if (w_count == 1)
    return inputs.front().detach().reshape({-1}); // nothing to add: no copy
  // The ring's sums, computed straight into the result: in the
  // reduce-scatter chunk c leaves worker c and each next worker adds its own
  // term to what it received (own + received), so the chunk ends as
  // x_{c+W-1} + (... + (x_{c+1} + x_c)); addition commutes bit for bit, so
  // ((x_c + x_{c+1}) + ...) + x_{c+W-1}, one pass per chunk, is the same sum.
  // The all-gather only copies it to every worker.
  std::vector<at::Tensor> flat;
  for (const auto& t : inputs)
    flat.push_back(t.detach().reshape({-1}));
  at::Tensor sum = torch::empty({flat.front().numel()}, flat.front().options());
  const auto chunks = ring_chunks(sum.numel(), w_count);
  for (int32_t c = 0; c < w_count; ++c) {
    const auto& range = chunks[static_cast<size_t>(c)];
    auto out = slice(sum, range);
    at::add_out(out, slice(flat[static_cast<size_t>(c)], range),
                slice(flat[static_cast<size_t>(ring_next(c, w_count))], range));
    for (int32_t k = 2; k < w_count; ++k)
      out.add_(slice(flat[static_cast<size_t>(modulo(c + k, w_count))], range));
  }
  return sum;
}

at::Tensor worker_order_sum(const std::vector<at::Tensor>& inputs) {
  check_inputs(inputs);
  torch::NoGradGuard no_grad;
  at::Tensor sum = inputs.front().detach().reshape({-1}).clone();
  for (size_t w = 1; w < inputs.size(); ++w)
    sum.add_(inputs[w].detach().reshape({-1}));
  return sum;
}

// -- gradient buckets ---------------------------------------------------------------

std::vector<bucket> make_buckets(const flat_layout& layout, double bucket_mb) {
  if (!(bucket_mb > 0))
    throw error("gradient buckets: expected bucket_mb > 0, got " + std::to_string(bucket_mb));
  const double cap_bytes = bucket_mb * 1024.0 * 1024.0;
  std::vector<bucket> out;
  bucket current;
  for (size_t i = layout.keys.size(); i-- > 0;) {
    const auto& key = layout.keys[i];
    if (key.range.end <= layout.frozen_numel)
      continue; // frozen: no gradient
    current.keys.push_back(i);
    current.numel += key.range.size();
    if (static_cast<double>(current.numel) * 4.0 >= cap_bytes)
      out.push_back(std::exchange(current, bucket{}));
  }
  if (!current.keys.empty())
    out.push_back(std::move(current));
  return out;
}

at::Tensor mean_of_sum(const at::Tensor& sum, int32_t workers) {
  // x / 1 is x, bit for bit: one worker's sum needs no pass over it.
  return workers == 1 ? sum : at::div(sum, static_cast<double>(workers));
}

BATON_VECTORISED
void mean_of_two(const at::Tensor& a, const at::Tensor& b, int32_t workers, at::Tensor& out) {
  torch::NoGradGuard no_grad;
  const at::Tensor other = b.contiguous();
  if (!a.is_contiguous() || !out.is_contiguous()) {
    out.copy_(a.add(other).div_(static_cast<double>(workers)));
    return;
  }
  const float* x = a.data_ptr<float>();
  const float* y = other.data_ptr<float>();
  float* result = out.data_ptr<float>();
  const auto w = static_cast<float>(workers);
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i)
    result[i] = (x[i] + y[i]) / w;
}

BATON_VECTORISED
void mean_of_workers(const std::vector<at::Tensor>& inputs, int64_t bucket_numel, int64_t first,
                     summation order, at::Tensor& out) {
  const auto workers = static_cast<int32_t>(inputs.size());
  const int64_t n = out.numel();
  if (workers < 2 || !out.is_contiguous() || out.scalar_type() != at::kFloat || first < 0 ||
      first + n > bucket_numel)
    throw error("mean of workers: expected W >= 2 and a contiguous float32 part of the bucket");
  std::vector<at::Tensor> held;
  std::vector<const float*> x;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].defined() &&
        (inputs[k].numel() != n || inputs[k].scalar_type() != at::kFloat))
      throw error("mean of workers: worker " + std::to_string(k) + "'s part has " +
                  std::to_string(inputs[k].numel()) + " elements, expected " +
                  std::to_string(n) + " float32");
    held.push_back(inputs[k].defined() ? inputs[k].contiguous() : torch::zeros({n}));
    x.push_back(held.back().data_ptr<float>());
  }
  float* result = out.data_ptr<float>();
  const auto divisor = static_cast<float>(workers);
  const auto chunks = ring_chunks(bucket_numel, workers);
  std::vector<const float*> terms(x.size());
  for (int32_t c = 0; c < workers; ++c) {
    const auto& chunk = chunks[static_cast<size_t>(c)];
    const int64_t lo = std::max(chunk.begin, first) - first;
    const int64_t hi = std::min(chunk.end, first + n) - first;
    const int32_t from = order == summation::ring ? c : 0;
    for (int32_t k = 0; k < workers; ++k)
      terms[static_cast<size_t>(k)] = x[static_cast<size_t>(modulo(from + k, workers))];
    // Term after term over a tile that stays in the cache: the same
    // operations on each element, in the same order, as one term at a time.
    constexpr int64_t tile = 2048;
    for (int64_t begin = lo; begin < hi; begin += tile) {
      const int64_t end = std::min(hi, begin + tile);
      for (int64_t i = begin; i < end; ++i)
        result[i] = terms[0][i] + terms[1][i];
      for (size_t k = 2; k < terms.size(); ++k)
        for (int64_t i = begin; i < end; ++i)
          result[i] += terms[k][i];
      for (int64_t i = begin; i < end; ++i)
        result[i] /= divisor;
    }
  }
}

at::Tensor bucket_flat(const bucket& b, const flat_layout& layout,
                       const std::vector<at::Tensor>& per_key) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (size_t i : b.keys)
    parts.push_back(per_key[i].defined() ? per_key[i].detach().reshape({-1})
                                         : torch::zeros({layout.keys[i].range.size()}));
  return torch::cat(parts);
}

void scatter_bucket(const bucket& b, const flat_layout& layout, const at::Tensor& flat,
                    std::vector<at::Tensor>& per_key) {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (size_t i : b.keys) {
    const auto& key = layout.keys[i];
    auto values = flat.narrow(0, at, key.range.size()).reshape(key.shape);
    if (per_key[i].defined())
      per_key[i].copy_(values);
    else
      per_key[i] = values; // a view of `flat`, which its caller no longer writes
    at += key.range.size();
  }
}

// -- learning rate ---------------------------------------------------------------

double scheduled_lr(const lr_schedule& s, int64_t step, int64_t steps_per_epoch) {
  if (!(s.lr > 0) || steps_per_epoch <= 0 ||
      (s.linear_scaling && (s.global_batch <= 0 || s.base_batch <= 0)))
    throw error("learning rate schedule: expected lr > 0, steps per epoch > 0 and, with "
                "linear scaling, global and base batch > 0");
  optimizer_spec o = s.optimizer;
  o.lr = s.lr;
  o.warmup_epochs = s.warmup_epochs;
  // The same expression as before the optimizer section: SGD runs keep their bits.
  const double target =
      s.linear_scaling ? s.lr * static_cast<double>(s.global_batch) / s.base_batch : 0;
  return lr_at(o, step, steps_per_epoch, s.epochs, target);
}

// -- the frozen prefix ---------------------------------------------------------

int64_t prefix_block_rows(const layered_model& prefix, bool cache, int64_t feature_block) {
  const auto dependent = batch_dependent_layers(prefix);
  if (cache && !dependent.empty())
    throw error("feature cache: frozen layer '" + dependent.front() +
                "' normalises over the batch (batch norm without running statistics), so "
                "its output cannot be cached per sample; freeze before it or set cache: none");
  // Such a prefix is computed over the whole minibatch, as training would.
  return dependent.empty() ? feature_block : 0;
}

// -- the local reference -------------------------------------------------------

namespace {

/// One worker: its model replica, its optimiser state and its cache.
struct replica {
  layered_model model;
  std::vector<at::Tensor> parameters; ///< the leaves, named_parameters() order
  std::vector<parameter_state> state; ///< per key, its optimizer state
  std::unique_ptr<feature_cache> cache;
};

/// Everything a run carries from step to step.
struct run_state {
  run_state(const data_parallel_settings& s, const dataset& d) : spec(s), train(d) {}
  const data_parallel_settings& spec;
  const dataset& train;
  int32_t epoch = 0;            ///< the epoch under way (augmentation's draws)
  std::vector<replica> workers;
  size_t point = 0;             ///< freeze point: layers [0, point) frozen
  int64_t feature_block = 1;    ///< frozen_features' block_rows for this prefix
  flat_layout layout;
  std::vector<bucket> buckets;
  std::optional<adaptive_freezer> freezer;
  std::optional<interval_gradients> interval;
  lr_schedule schedule;
  int64_t steps_per_epoch = 0;
  int64_t step = 0;             ///< global steps taken
  int64_t local_steps = 0;      ///< local SGD: steps since the last average
  non_finite_watch watch{"the data-parallel reference"}; ///< names where a NaN loss came from
  std::mutex watch_mutex;       ///< the workers' lanes check their losses one at a time
  /// The workers' threads when they compute at once (spec.concurrent_workers).
  std::unique_ptr<worker_lanes> lanes;
  double epoch_loss = 0;        ///< sum of minibatch mean loss x samples
  int64_t epoch_samples = 0;
  data_parallel_result result;
  warm_up_watch warm_up{spec.warm_up_samples};
};

/// Moves the freeze point (never backwards) on every replica and cache.
void set_point(run_state& s, size_t point) {
  s.feature_block = prefix_block_rows(s.workers.front().model.slice(0, point), s.spec.cache,
                                      s.spec.feature_block);
  s.point = point;
  for (auto& w : s.workers) {
    apply_freeze_point(w.model, point);
    if (w.cache)
      w.cache->set_freeze_point(point);
  }
  s.layout = make_flat_layout(s.workers.front().model, point);
  s.buckets = make_buckets(s.layout, s.spec.bucket_mb);
}

/// The mean loss of one worker's minibatch, with its graph (trainable part).
at::Tensor minibatch_loss(run_state& s, replica& w, const std::vector<int64_t>& ids) {
  auto [images, labels] = gather_training(s.train, ids, s.epoch);
  // The inputs at hand give the rows the dataset's would (frozen_features).
  const at::Tensor input =
    s.point > 0
      ? frozen_features(w.model.slice(0, s.point), w.cache.get(), images, ids, s.feature_block)
      : images;
  const layered_model trained = w.model.slice(s.point, w.model.size());
  const at::Tensor loss = torch::nn::functional::cross_entropy(trained.forward(input), labels);
  const double value = loss.item<double>();
  std::lock_guard<std::mutex> lock(s.watch_mutex);
  s.watch.check(value, trained, input);
  return loss;
}

/// Runs part(i, lo, hi) for every key i of `sizes[i]` elements, each key
/// cut into as many equal parts as the run has lanes, lane k taking part k
/// of every key (one part per key without lanes): for elementwise work (the
/// mean, the optimizer's step), whose bits do not depend on the cut.
void in_parts(const run_state& s, const std::vector<int64_t>& sizes,
              const std::function<void(size_t, int64_t, int64_t)>& part) {
  const auto lanes = static_cast<int64_t>(s.lanes ? s.lanes->lanes() : 1);
  auto lane = [&](size_t k) {
    torch::NoGradGuard no_grad; // the guard is a thread's own
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t lo = sizes[i] * static_cast<int64_t>(k) / lanes;
      const int64_t hi = sizes[i] * (static_cast<int64_t>(k) + 1) / lanes;
      if (hi > lo)
        part(i, lo, hi);
    }
  };
  if (lanes == 1)
    lane(0);
  else
    s.lanes->run(static_cast<size_t>(lanes), lane);
}

/// One worker's step: its gradients (undefined for frozen keys) and loss.
struct worker_step {
  std::vector<at::Tensor> grads;
  double loss = 0;
  int64_t samples = 0;
};

/// Forward and backward of one worker's minibatch, leaving no gradient in
/// the model. Touches nothing of `s` but `w` (and the watch, under its
/// lock): the workers' lanes run it at once.
worker_step worker_gradients(run_state& s, replica& w, const std::vector<int64_t>& ids) {
  const at::Tensor loss = minibatch_loss(s, w, ids);
  loss.backward();
  worker_step out;
  out.loss = loss.item<double>();
  out.samples = static_cast<int64_t>(ids.size());
  for (auto& p : w.parameters) {
    // The gradient tensor itself: the model lets go of it (no copy).
    out.grads.push_back(p.grad().defined() ? p.grad().detach() : at::Tensor());
    p.mutable_grad() = at::Tensor();
  }
  return out;
}

/// Every worker's step on its minibatch: at once on the lanes, or one after
/// another; the epoch's loss summed in worker order either way.
std::vector<worker_step> every_worker_step(run_state& s,
                                           const std::vector<std::vector<int64_t>>& minibatches,
                                           const std::function<void(worker_step&, size_t)>& then) {
  std::vector<worker_step> steps(s.workers.size());
  auto one = [&](size_t w) {
    steps[w] = worker_gradients(s, s.workers[w], minibatches[w]);
    then(steps[w], w);
  };
  if (s.lanes)
    s.lanes->run(s.workers.size(), one);
  else
    for (size_t w = 0; w < s.workers.size(); ++w)
      one(w);
  for (const auto& step : steps) {
    s.epoch_loss += step.loss * static_cast<double>(step.samples);
    s.epoch_samples += step.samples;
  }
  return steps;
}

/// The sum over workers of per-key tensors divided by W, bucket by bucket,
/// in the spec's summation order (frozen keys stay undefined).
std::vector<at::Tensor> all_reduce_mean(const run_state& s,
                                        const std::vector<std::vector<at::Tensor>>& per_worker) {
  // One worker's mean is its own tensors, bit for bit (x / 1 is x): no copy
  // into buckets and back (the limit's one-thread run is this loop at W = 1).
  if (per_worker.size() == 1)
    return per_worker.front();
  std::vector<at::Tensor> out(s.layout.keys.size());
  // Each element summed in its bucket's order (two workers': x + y, one
  // order), straight from the workers' gradients into the mean, without the
  // buckets' copies in and out, each lane its part of every key
  // (compare-mlp's local run, 192 samples a step: at W = 2 9.7 -> 8.8 ms; at
  // W = 3 on 2 lanes the buckets' one-thread passes were ~2.7 of 9.6 ms).
  const size_t keys = s.layout.keys.size();
  std::vector<int64_t> sizes(keys, 0), first(keys, 0), bucket_numel(keys, 0);
  for (const auto& bucket : s.buckets) {
    int64_t at = 0;
    for (size_t i : bucket.keys) {
      const auto& key = s.layout.keys[i];
      sizes[i] = key.range.size();
      first[i] = at;
      bucket_numel[i] = bucket.numel;
      out[i] = torch::empty(key.shape);
      at += sizes[i];
    }
  }
  in_parts(s, sizes, [&](size_t i, int64_t lo, int64_t hi) {
    std::vector<at::Tensor> parts;
    for (const auto& tensors : per_worker) {
      const auto& grad = tensors[i];
      parts.push_back(grad.defined() ? grad.detach().reshape({-1}).narrow(0, lo, hi - lo)
                                     : at::Tensor());
    }
    at::Tensor into = out[i].view({-1}).narrow(0, lo, hi - lo);
    mean_of_workers(parts, bucket_numel[i], first[i] + lo, s.spec.sum, into);
  });
  return out;
}

/// One optimizer step of a part of a parameter (`parameter`, `gradient` and
/// `views`' moments: views of the same elements), written in place; a step
/// that made new moments (not a fused one) gives them back into the views.
/// Returns the state's step count after it.
int64_t step_part_in_place(at::Tensor parameter, const at::Tensor& gradient,
                           const parameter_state& views, const optimizer_spec& optimizer,
                           double lr) {
  parameter_state state = views;
  optimizer_step_in_place(parameter, gradient, state, optimizer, lr);
  for (auto [view, moment] :
       {std::pair{views.first, state.first}, std::pair{views.second, state.second}})
    if (view.defined() && moment.data_ptr() != view.data_ptr())
      view.copy_(moment);
  return state.steps;
}

/// One optimizer step of replica `w`'s trainable keys with `grads`
/// (clipped first when the optimizer says so: over the trainable keys).
void optimizer_update(run_state& s, replica& w, const std::vector<at::Tensor>& grads,
                      bool on_lanes = false) {
  const double lr = scheduled_lr(s.schedule, s.step, s.steps_per_epoch);
  torch::NoGradGuard no_grad;
  auto clipped = clip_grad_norm(grads, s.spec.optimizer.clip_grad_norm);
  for (size_t i = 0; i < clipped.size() && i < s.layout.keys.size(); ++i)
    if (s.layout.keys[i].fixed) // kept by its file: never stepped
      clipped[i] = at::Tensor();
  auto flat_view = [](const at::Tensor& t) { return !t.defined() || t.is_contiguous(); };
  for (size_t i = 0; i < w.parameters.size() && on_lanes; ++i)
    on_lanes = flat_view(w.parameters[i]) && flat_view(w.state[i].first) &&
               flat_view(w.state[i].second);
  if (!on_lanes || !s.lanes) {
    for (size_t i = 0; i < w.parameters.size(); ++i) {
      if (!clipped[i].defined())
        continue;
      auto parameter = w.parameters[i].detach();
      optimizer_step_in_place(parameter, clipped[i], w.state[i], s.spec.optimizer, lr);
    }
    return;
  }
  // Each lane steps its part of every parameter, with its part of the
  // state; the step count moves once.
  std::vector<int64_t> sizes(w.parameters.size(), 0), steps(w.parameters.size(), 0);
  for (size_t i = 0; i < w.parameters.size(); ++i)
    sizes[i] = clipped[i].defined() ? w.parameters[i].numel() : 0;
  in_parts(s, sizes, [&](size_t i, int64_t lo, int64_t hi) {
    auto part = [lo, hi](const at::Tensor& t) {
      return t.defined() ? t.reshape({-1}).narrow(0, lo, hi - lo) : t;
    };
    const int64_t taken =
      step_part_in_place(part(w.parameters[i].detach()), part(clipped[i]),
                         {part(w.state[i].first), part(w.state[i].second), w.state[i].steps},
                         s.spec.optimizer, lr);
    if (lo == 0)
      steps[i] = taken;
  });
  for (size_t i = 0; i < w.parameters.size(); ++i)
    if (sizes[i] > 0)
      w.state[i].steps = steps[i];
}

/// Takes the adaptive freezing decision when one is due, on the reduced gradient.
void adapt_freezing(run_state& s, const std::vector<at::Tensor>& reduced) {
  if (!s.freezer)
    return;
  s.interval->add(reduced);
  if (!s.freezer->due(s.step))
    return;
  const int32_t before = s.freezer->frozen();
  auto decision = s.freezer->decide(s.step, s.interval->l1_norms());
  s.interval->reset();
  if (!decision)
    return;
  s.result.decisions.push_back(*decision);
  if (s.freezer->frozen() > before)
    set_point(s, freeze_point(s.workers.front().model, decision->layer));
}

/// Two workers' SGD step with their gradients' mean taken in the step's own
/// pass (sgd_step_of_mean_in_place, as a pair of worker actors steps), each
/// lane its part of every key: the weights optimizer_update leaves with
/// all_reduce_mean's mean, without the pass that writes the mean. Returns
/// false, having changed nothing, where that step does not apply: another
/// optimizer, Nesterov, clipping or adaptive freezing (they read the mean),
/// tensors that are not contiguous.
bool step_of_two_means(run_state& s, const std::vector<std::vector<at::Tensor>>& per_worker) {
  const auto& o = s.spec.optimizer;
  if (!steps_of_two_means(static_cast<int32_t>(per_worker.size()), o, s.freezer.has_value()))
    return false;
  auto& w = s.workers.front();
  const auto& a = per_worker[0];
  const auto& b = per_worker[1];
  std::vector<int64_t> sizes(w.parameters.size(), 0), steps(w.parameters.size(), 0);
  for (size_t i = 0; i < w.parameters.size(); ++i) {
    if (!a[i].defined() && !b[i].defined())
      continue;
    for (const at::Tensor* t :
         std::initializer_list<const at::Tensor*>{&w.parameters[i], &w.state[i].first, &a[i],
                                                  &b[i]})
      if (!t->defined() || !t->is_contiguous() || t->scalar_type() != at::kFloat ||
          t->numel() != w.parameters[i].numel())
        return false;
    sizes[i] = w.parameters[i].numel();
  }
  const double lr = scheduled_lr(s.schedule, s.step, s.steps_per_epoch);
  in_parts(s, sizes, [&](size_t i, int64_t lo, int64_t hi) {
    auto part = [lo, hi](const at::Tensor& t) { return t.view({-1}).narrow(0, lo, hi - lo); };
    at::Tensor parameter = part(w.parameters[i].detach());
    parameter_state state{part(w.state[i].first), {}, w.state[i].steps};
    TORCH_CHECK(sgd_step_of_mean_in_place(parameter, {{0, part(a[i]), part(b[i])}}, 2, state, o,
                                          lr),
                "data-parallel reference: the step of two means did not fuse");
    if (lo == 0)
      steps[i] = state.steps;
  });
  for (size_t i = 0; i < w.parameters.size(); ++i)
    if (sizes[i] > 0)
      w.state[i].steps = steps[i];
  return true;
}

/// A synchronous step: every worker's gradient, reduced, one update (of
/// worker 0's parameters, which every replica shares: see start).
void synchronous_step(run_state& s, const std::vector<std::vector<int64_t>>& minibatches) {
  std::vector<std::vector<at::Tensor>> per_worker;
  for (auto& step : every_worker_step(s, minibatches, [](worker_step&, size_t) {}))
    per_worker.push_back(std::move(step.grads));
  if (step_of_two_means(s, per_worker))
    return;
  const auto reduced = all_reduce_mean(s, per_worker);
  optimizer_update(s, s.workers.front(), reduced, true);
  adapt_freezing(s, reduced);
}

/// Local SGD: averages the replicas' trainable weights.
void average_parameters(run_state& s) {
  std::vector<std::vector<at::Tensor>> per_worker;
  for (auto& w : s.workers)
    per_worker.push_back(w.parameters);
  const auto mean = all_reduce_mean(s, per_worker);
  torch::NoGradGuard no_grad;
  for (auto& w : s.workers)
    for (size_t i = 0; i < mean.size(); ++i)
      if (mean[i].defined())
        w.parameters[i].copy_(mean[i]);
  s.local_steps = 0;
}

/// A local SGD step: every worker steps its own replica with its own gradient.
void local_step(run_state& s, const std::vector<std::vector<int64_t>>& minibatches) {
  // Each replica has its own optimizer state (momentum, adam's moments),
  // never averaged: only the weights are.
  every_worker_step(s, minibatches, [&s](worker_step& step, size_t w) {
    optimizer_update(s, s.workers[w], step.grads);
  });
  if (++s.local_steps == s.spec.sync_every)
    average_parameters(s);
}

/// Trains one epoch; false when the time budget (`over_budget`) cut it
/// short (its loss is then not an epoch's and is not recorded).
template <class OverBudget>
bool train_epoch(run_state& s, int32_t epoch, OverBudget over_budget) {
  std::vector<std::vector<std::vector<int64_t>>> batches; // [worker][step]
  for (int32_t w = 0; w < s.spec.workers; ++w)
    batches.push_back(worker_minibatches(
        worker_share(s.train.size(), s.spec.seed, epoch, w, s.spec.workers, s.spec.remainder),
        s.spec.batch_size));
  s.epoch = epoch;
  s.epoch_loss = 0;
  s.epoch_samples = 0;
  s.warm_up.epoch_started();
  for (size_t k = 0; k < batches.front().size(); ++k) {
    if (over_budget()) {
      s.result.samples += s.epoch_samples;
      return false;
    }
    std::vector<std::vector<int64_t>> minibatches;
    for (const auto& worker_batches : batches)
      minibatches.push_back(worker_batches[k]);
    if (s.spec.sync_every > 0)
      local_step(s, minibatches);
    else
      synchronous_step(s, minibatches);
    ++s.step;
    s.warm_up.trained(s.result.samples + s.epoch_samples);
  }
  if (s.spec.sync_every > 0 && s.local_steps > 0)
    average_parameters(s);
  s.warm_up.epoch_ended();
  s.result.samples += s.epoch_samples;
  s.result.train_loss.push_back(
      s.epoch_samples > 0 ? s.epoch_loss / static_cast<double>(s.epoch_samples) : 0.0);
  return true;
}

/// Test accuracy of worker 0's model (evaluation mode), then back to training.
double evaluate(run_state& s, const dataset& test) {
  const layered_model& m = s.workers.front().model;
  torch::NoGradGuard no_grad;
  m.slice(0, m.size()).train(false);
  int64_t correct = 0;
  for (const auto& ids : plan_eval(test.size(), s.spec.eval_batch)) {
    auto [images, labels] = gather(test, ids);
    correct += m.forward(images).argmax(1).eq(labels).sum().item<int64_t>();
  }
  apply_freeze_point(m, s.point);
  return test.size() > 0 ? static_cast<double>(correct) / static_cast<double>(test.size()) : 0;
}

void check_spec(const data_parallel_settings& spec) {
  if (spec.workers < 1 || spec.batch_size <= 0 || spec.epochs < 0 || spec.sync_every < 0 ||
      spec.eval_batch <= 0 || spec.concurrent_workers < 1 || spec.threads_per_worker < 1)
    throw error("data-parallel: expected workers >= 1, batch_size > 0, epochs >= 0, "
                "sync_every >= 0, eval_batch > 0, concurrent_workers >= 1 and "
                "threads_per_worker >= 1");
  if (spec.cache && spec.feature_block < 1)
    throw error("data-parallel: the feature cache needs feature_block >= 1");
  if (!spec.freeze_groups.empty() && !spec.freeze_up_to.empty())
    throw error("data-parallel: freeze up_to and adaptive freezing are exclusive");
}

void start(run_state& s, const model_factory& make) {
  const auto& spec = s.spec;
  for (int32_t w = 0; w < spec.workers; ++w) {
    replica r;
    r.model = make();
    r.parameters = r.model.parameters();
    for (const auto& p : r.parameters)
      r.state.push_back(make_parameter_state(p, spec.optimizer));
    if (spec.cache)
      r.cache = std::make_unique<feature_cache>(spec.cache_mb);
    s.workers.push_back(std::move(r));
  }
  // Synchronous steps update worker 0 and leave every replica with its
  // weights: the replicas share worker 0's parameter tensors (each keeps
  // its own gradients, buffers and autograd graph) instead of copying them
  // in after every step; local SGD's replicas step apart and keep their own.
  if (spec.sync_every == 0) {
    torch::NoGradGuard no_grad;
    const auto& first = s.workers.front().parameters;
    for (size_t w = 1; w < s.workers.size(); ++w)
      for (size_t i = 0; i < first.size(); ++i)
        s.workers[w].parameters[i].set_data(first[i]);
  }
  const layered_model& m = s.workers.front().model;
  if (!spec.freeze_groups.empty() && spec.sync_every == 0) {
    s.freezer.emplace(spec.freeze_groups, spec.adaptive);
    s.interval.emplace(parameter_groups(m, spec.freeze_groups),
                       static_cast<int32_t>(spec.freeze_groups.size()));
  }
  set_point(s, freeze_point(m, spec.freeze_up_to));
  s.steps_per_epoch = data_parallel_steps_per_epoch(s.train.size(), spec.workers,
                                                    spec.batch_size, spec.remainder);
  s.schedule = {spec.optimizer.lr, spec.linear_scaling, spec.workers * spec.batch_size,
                spec.base_batch, spec.warmup_epochs, spec.optimizer, spec.epochs};
}

} // namespace

data_parallel_result run_data_parallel_local(const model_factory& make, const dataset& train,
                                             const dataset& test,
                                             const data_parallel_settings& spec) {
  return run_data_parallel_local(make, data_splits{train, {}, test}, spec);
}

data_parallel_result run_data_parallel_local(const model_factory& make, const data_splits& data,
                                             const data_parallel_settings& spec) {
  check_spec(spec);
  check_optimizer(spec.optimizer);
  run_state s(spec, data.train);
  best_weights best(spec.selection);
  start(s, make);
  if (spec.concurrent_workers > 1 && spec.workers > 1)
    s.lanes = std::make_unique<worker_lanes>(
      static_cast<size_t>(std::min(spec.concurrent_workers, spec.workers)),
      spec.threads_per_worker);
  auto started = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  auto over_budget = [&] {
    return spec.stop_after_seconds > 0 && seconds() >= spec.stop_after_seconds;
  };
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    if (!train_epoch(s, epoch, over_budget))
      break;
    s.result.test_accuracy.push_back(evaluate(s, data.test));
    const double validation = data.validation.size() > 0 ? evaluate(s, data.validation) : -1;
    if (validation >= 0)
      s.result.validation_accuracy.push_back(validation);
    s.result.epoch_seconds.push_back(seconds());
    best.epoch_end(epoch, validation, s.workers.front().model.state());
    if (spec.target_accuracy > 0 && s.result.test_accuracy.back() >= spec.target_accuracy)
      break;
    if (best.stop())
      break;
  }
  s.result.best_epoch = best.best_epoch();
  s.result.best_weights = best.weights();
  s.result.steps = s.step;
  s.result.steady = s.warm_up.steady();
  s.result.frozen_layers = s.point;
  s.result.weights_digest = weights_digest(s.workers.front().model);
  s.result.model = s.workers.front().model;
  for (const auto& w : s.workers)
    if (w.cache)
      s.result.cache += w.cache->stats();
  return s.result;
}

bool steps_of_two_means(int32_t workers, const optimizer_spec& optimizer, bool adaptive) {
  return workers == 2 && optimizer.name == "sgd" && !optimizer.nesterov &&
         optimizer.clip_grad_norm <= 0 && !adaptive;
}

double time_reference_steps(const model_factory& make, data_parallel_settings spec,
                            const std::vector<int64_t>& sample_shape, int64_t classes,
                            int32_t steps, int32_t warm_up, double min_seconds) {
  if (steps < 1 || warm_up < 1 || classes < 1)
    throw error("data-parallel: timing the reference's steps needs steps, warm-up steps and "
                "classes >= 1");
  const int64_t per_step = static_cast<int64_t>(spec.workers) * spec.batch_size;
  std::vector<int64_t> shape{per_step * (steps + warm_up)};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  data_splits data;
  data.train.name = "synthetic";
  data.train.images = torch::randn(shape);
  data.train.labels = torch::randint(classes, {shape.front()}, torch::kLong);
  data.train.classes = classes;
  // One step's samples to test on (batch norm with batch statistics needs
  // more than one): the evaluation after the epoch is not timed.
  data.test = data.train;
  data.test.images = data.train.images.narrow(0, 0, per_step);
  data.test.labels = data.train.labels.narrow(0, 0, per_step);
  spec.epochs = 1;
  spec.warm_up_samples = per_step * warm_up;
  spec.target_accuracy = 0;
  spec.stop_after_seconds = 0;
  spec.selection = {};
  const auto steady = run_data_parallel_local(make, data, spec).steady;
  if (!steady || steady->samples <= 0)
    throw error("data-parallel: the reference's timed steps ended inside its warm-up");
  const double step =
    steady->seconds / (static_cast<double>(steady->samples) / static_cast<double>(per_step));
  if (step <= 0 || step * steps >= min_seconds)
    return step;
  const auto step_bytes =
    std::max<int64_t>(1, static_cast<int64_t>(data.train.images.nbytes()) / (steps + warm_up));
  const auto most = static_cast<double>(max_timed_reference_bytes / step_bytes - warm_up);
  const double more = std::min(most, std::ceil(min_seconds / step));
  if (more <= steps)
    return step;
  return time_reference_steps(make, spec, sample_shape, classes, static_cast<int32_t>(more),
                              warm_up);
}

double time_whole_step(const model_factory& make, data_parallel_settings spec,
                       const std::vector<int64_t>& sample_shape, int64_t classes,
                       int32_t copies, double min_seconds) {
  if (copies < 1)
    throw error("timing a whole step needs copies >= 1, got " + std::to_string(copies));
  spec.workers = 1;
  spec.concurrent_workers = 1;
  spec.sync_every = 0;
  auto time_one = [&] {
    at::set_num_threads(1);
    return time_reference_steps(make, spec, sample_shape, classes, 15, 5, min_seconds);
  };
  // A future's destructor waits for its copy, also when another one threw.
  const int previous = at::get_num_threads();
  std::vector<std::future<double>> timings;
  for (int32_t k = 0; k < copies; ++k)
    timings.push_back(std::async(std::launch::async, time_one));
  for (auto& timing : timings)
    timing.wait();
  at::set_num_threads(previous);
  const double seconds = timings.front().get();
  for (size_t k = 1; k < timings.size(); ++k)
    timings[k].get();
  return seconds;
}

} // namespace baton::model

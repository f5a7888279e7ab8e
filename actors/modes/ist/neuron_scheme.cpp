#include "actors/modes/ist/neuron_scheme.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>

#include <torch/torch.h>

#include "actors/modes/ist/job.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/shard.hpp"
#include "actors/modes/ist/role_settings_yaml.hpp"
#include "actors/modes/ist/round_timing.hpp"
#include "actors/modes/ist/worker.hpp"
#include "messages/errc.hpp"
#include "model/core/error.hpp"
#include "model/ist_mlp/mlp.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace {

/// The shape of worker `worker`'s subnet tensor number `tensor`.
std::vector<int64_t> subnet_tensor_shape(const model::ist::shape& shape,
                                         const model::ist::partition& partition, int32_t worker,
                                         size_t tensor) {
  const size_t layers = shape.hidden.size();
  auto width = [&](size_t k) {
    return static_cast<int64_t>(partition.neurons(k, worker).size());
  };
  const size_t k = tensor / 3;
  if (tensor % 3 != 0)
    return {width(k)};
  const int64_t rows = k < layers ? width(k) : shape.classes;
  return {rows, k == 0 ? shape.inputs : width(k - 1)};
}

/// `shape` with `piece.dim` cut to the piece's positions.
std::vector<int64_t> piece_shape(std::vector<int64_t> shape, const model::ist::piece& piece) {
  shape.at(static_cast<size_t>(piece.dim)) = piece.positions.size();
  return shape;
}

void check_piece(const at::Tensor& t, const std::vector<int64_t>& want, const std::string& what) {
  if (!t.defined() || t.scalar_type() != at::kFloat || t.sizes() != at::IntArrayRef(want))
    throw model::error(what + ": expected a float tensor of shape " +
                       c10::str(at::IntArrayRef(want)) + ", got " +
                       (t.defined() ? c10::str(t.sizes()) + " " +
                                        std::string{c10::toString(t.scalar_type())}
                                    : std::string{"none"}));
}

} // namespace

model::ist::network network_of(std::vector<at::Tensor> parameters) {
  if (parameters.size() % 3 != 1)
    throw model::error("ist: " + std::to_string(parameters.size()) +
                       " tensors are not a network (expected 3 per hidden layer + 1)");
  model::ist::network net;
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto& into = i % 3 == 0 ? net.weights : i % 3 == 1 ? net.bn_weight : net.bn_bias;
    into.push_back(std::move(parameters[i]));
  }
  return net;
}

model::ist::partition whole_partition(const model::ist::shape& shape) {
  model::ist::partition p;
  p.workers = 1;
  for (int64_t width : shape.hidden) {
    std::vector<int64_t> all(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i)
      all[static_cast<size_t>(i)] = i;
    p.parts.push_back({std::move(all)});
  }
  return p;
}

std::vector<at::Tensor> take_pieces(const model::ist::network& whole,
                                    const model::ist::partition& partition, int32_t worker,
                                    const std::vector<model::ist::piece>& pieces) {
  std::vector<at::Tensor> out;
  for (const auto& piece : pieces)
    out.push_back(model::ist::take_piece(whole, partition, worker, piece));
  return out;
}

void put_pieces(model::ist::network& whole, const model::ist::partition& partition,
                int32_t worker, const std::vector<model::ist::piece>& pieces,
                const std::vector<at::Tensor>& values) {
  if (values.size() != pieces.size())
    throw model::error("ist: " + std::to_string(values.size()) + " tensors for " +
                       std::to_string(pieces.size()) + " pieces");
  const auto shape = whole.shape();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& piece = pieces[i];
    check_piece(values[i],
                piece_shape(subnet_tensor_shape(shape, partition, worker, piece.tensor), piece),
                "ist piece " + std::to_string(i));
    model::ist::put_piece(whole, partition, worker, piece, values[i]);
  }
}

model::ist::network assemble_subnet(const model::ist::shape& shape,
                                    const model::ist::partition& partition, int32_t worker,
                                    const std::vector<std::vector<at::Tensor>>& from_shards) {
  const auto shards = static_cast<int32_t>(from_shards.size());
  const size_t tensors = 3 * shape.hidden.size() + 1;
  std::vector<std::vector<at::Tensor>> parts(tensors);
  std::vector<int64_t> dims(tensors, 0);
  for (int32_t s = 0; s < shards; ++s) {
    const auto pieces = model::ist::shard_pieces(shape, partition, worker, s, shards);
    const auto& got = from_shards[static_cast<size_t>(s)];
    if (got.size() != pieces.size())
      throw model::error("ist: shard " + std::to_string(s) + " sent " +
                         std::to_string(got.size()) + " tensors, expected " +
                         std::to_string(pieces.size()));
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto& piece = pieces[i];
      check_piece(got[i],
                  piece_shape(subnet_tensor_shape(shape, partition, worker, piece.tensor), piece),
                  "ist: shard " + std::to_string(s) + "'s piece " + std::to_string(i));
      parts.at(piece.tensor).push_back(got[i]);
      dims[piece.tensor] = piece.dim;
    }
  }
  std::vector<at::Tensor> parameters;
  for (size_t i = 0; i < tensors; ++i)
    parameters.push_back(torch::cat(parts[i], dims[i]));
  return network_of(std::move(parameters));
}

std::vector<at::Tensor> split_subnet(const model::ist::network& subnet,
                                     const model::ist::shape& shape,
                                     const model::ist::partition& partition, int32_t worker,
                                     int32_t shard, int32_t shards) {
  const auto parameters = subnet.parameters();
  std::vector<at::Tensor> out;
  for (const auto& piece : model::ist::shard_pieces(shape, partition, worker, shard, shards))
    out.push_back(parameters.at(piece.tensor)
                    .detach()
                    .narrow(piece.dim, piece.positions.begin, piece.positions.size())
                    .clone(at::MemoryFormat::Contiguous));
  return out;
}

int64_t owned_elements(const model::ist::shape& shape, int32_t shard, int32_t shards) {
  int64_t n = 0;
  for (const auto& piece : model::ist::shard_pieces(shape, whole_partition(shape), 0, shard,
                                                   shards))
    n += piece.elements;
  return n;
}

// -- a round, timed ----------------------------------------------------------------------

namespace {

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// This thread's torch budget at one thread while it lives.
struct one_thread {
  int saved = at::get_num_threads();
  one_thread() { at::set_num_threads(1); }
  ~one_thread() { at::set_num_threads(saved); }
  one_thread(const one_thread&) = delete;
  one_thread& operator=(const one_thread&) = delete;
};

/// Rounds each copy times after its warm-up one.
constexpr int32_t timed_rounds = 5;

/// Every timed round's figures, of every copy.
struct round_samples {
  std::vector<double> assemble, step, split, partition, take, put;
};

/// One copy: a warm-up round, `timed_rounds` timed ones into `out` (under
/// `lock`), then untimed ones until every copy has timed its own (`timed`
/// counts those), so that no copy's figures come from a machine the others
/// have left.
void time_rounds(const model::ist::shape& shape, int32_t workers, int32_t shards,
                 int32_t local_steps, int64_t batch, const model::optimizer_spec& optimizer,
                 int32_t copies, std::atomic<int32_t>& timed, std::mutex& lock,
                 round_samples& out) {
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  one_thread budget; // a worker's compute thread
  model::dataset data;
  data.name = "synthetic";
  data.images = torch::randn({batch * local_steps, 1, 1, shape.inputs});
  data.labels = torch::randint(shape.classes, {batch * local_steps}, torch::kLong);
  data.classes = shape.classes;
  std::vector<std::vector<int64_t>> minibatches(static_cast<size_t>(local_steps));
  for (int64_t i = 0; i < batch * local_steps; ++i)
    minibatches[static_cast<size_t>(i / batch)].push_back(i);
  auto whole = model::ist::make_network(shape, 42);
  for (int32_t round = 0; round <= timed_rounds || timed.load() < copies; ++round) {
    const auto began = clock::now();
    const auto p = model::ist::make_partition(shape.hidden, workers, 42, round);
    const auto partitioned = clock::now();
    std::vector<std::vector<at::Tensor>> pieces;
    for (int32_t s = 0; s < shards; ++s)
      pieces.push_back(
        take_pieces(whole, p, 0, model::ist::shard_pieces(shape, p, 0, s, shards)));
    const auto taken = clock::now();
    auto subnet = assemble_subnet(shape, p, 0, pieces);
    const auto assembled = clock::now();
    model::ist::local_steps(subnet, data, minibatches, 0, optimizer);
    const auto trained = clock::now();
    std::vector<std::vector<at::Tensor>> back;
    for (int32_t s = 0; s < shards; ++s)
      back.push_back(split_subnet(subnet, shape, p, 0, s, shards));
    const auto cut = clock::now();
    for (int32_t s = 0; s < shards; ++s)
      put_pieces(whole, p, 0, model::ist::shard_pieces(shape, p, 0, s, shards),
                 back[static_cast<size_t>(s)]);
    const auto written = clock::now();
    if (round == 0 || round > timed_rounds)
      continue; // the warm-up, or keeping the others company
    std::lock_guard<std::mutex> guard{lock};
    out.partition.push_back(seconds(began, partitioned));
    out.take.push_back(seconds(partitioned, taken) / shards);
    out.assemble.push_back(seconds(began, partitioned) + seconds(taken, assembled));
    out.step.push_back(seconds(assembled, trained) / local_steps);
    out.split.push_back(seconds(trained, cut));
    out.put.push_back(seconds(cut, written) / shards);
    if (round == timed_rounds)
      timed += 1;
  }
}

} // namespace

round_timing time_round(const model::ist::shape& shape, int32_t workers, int32_t shards,
                        int32_t local_steps, int64_t batch,
                        const model::optimizer_spec& optimizer, int32_t copies) {
  if (workers < 1 || shards < 1 || local_steps < 1 || batch < 1 || copies < 1)
    throw model::error("ist: timing a round needs workers, shards, local_steps, batch and "
                       "copies >= 1");
  std::atomic<int32_t> timed{0};
  std::mutex lock;
  round_samples samples;
  auto one = [&] {
    try {
      time_rounds(shape, workers, shards, local_steps, batch, optimizer, copies, timed, lock,
                  samples);
    } catch (...) {
      timed += copies; // the others stop at their own count
      throw;
    }
  };
  std::vector<std::future<void>> others;
  for (int32_t k = 1; k < copies; ++k)
    others.push_back(std::async(std::launch::async, one));
  one();
  for (auto& other : others)
    other.get();
  return {{median_of(samples.assemble), median_of(samples.split), median_of(samples.partition),
           median_of(samples.take), median_of(samples.put)},
          median_of(samples.step)};
}

// -- the scheme: settings ----------------------------------------------------------------

namespace {

constexpr int64_t max_message_bytes = int64_t{64} << 20;

/// The values of one sample: C x H x W (Fashion-MNIST: 1 x 28 x 28).
int64_t sample_values(const topology& t) {
  int64_t n = 1;
  for (int64_t d : t.sample_shape)
    n *= d;
  return n;
}

} // namespace

template <>
model::ist::shape neuron_scheme::shape_of(const topology& t, const model::task& task) {
  model::ist::shape x;
  x.inputs = sample_values(t);
  x.hidden = section_of(t).hidden;
  x.classes = task.classes;
  return x;
}

template <>
std::string neuron_scheme::misfit(const shape& x, int32_t workers, int32_t shards) {
  const int32_t at_least = std::max(workers, shards);
  for (int64_t width : x.hidden)
    if (width < at_least) // every worker and every shard gets a neuron of every layer
      return "hidden widths of at least " + std::to_string(at_least);
  return "";
}

// Shard 0 owns the most (the first parts are one neuron longer); a subnet
// piece is part of an owned slice, so no message is larger.
template <>
caf::error neuron_scheme::check_plan(const topology& t, const shape& x, int32_t shards) {
  const int64_t bytes = owned_elements(x, 0, shards) * 4;
  if (bytes <= max_message_bytes)
    return {};
  return make_error(errc::bad_config,
                    t.file + ": a shard's slices of " + std::to_string(bytes >> 20) +
                      " MiB exceed the 64 MiB a message may carry (add ist.shards)");
}

// -- the scheme: a worker ------------------------------------------------------------------

template <>
neuron_scheme::worker_model neuron_scheme::make_worker(const worker_settings& spec) {
  worker_model m;
  if (spec.worker == 0) {
    m.whole = model::ist::make_network(spec.shape, spec.data.plan.seed);
    m.whole_partition = whole_partition(spec.shape);
  }
  return m;
}

template <>
std::string neuron_scheme::check_samples(const shape& x, const model::dataset& data) {
  if (data.size() == 0 || data.images.numel() / data.size() == x.inputs)
    return "";
  return "samples of " + std::to_string(data.images.numel() / data.size()) +
         " values, expected " + std::to_string(x.inputs);
}

template <>
trained_round neuron_scheme::train(worker_model&, const worker_settings& spec, int64_t round,
                                   int32_t epoch,
                                   const std::vector<std::vector<at::Tensor>>& from_shards,
                                   const model::dataset& data,
                                   const std::vector<std::vector<int64_t>>& minibatches) {
  const auto partition =
    model::ist::make_partition(spec.shape.hidden, spec.workers, spec.data.plan.seed, round);
  auto subnet = assemble_subnet(spec.shape, partition, spec.worker, from_shards);
  trained_round out;
  out.steps = model::ist::local_steps(subnet, data, minibatches, epoch, spec.optimizer,
                                      schedule_of(spec, round, data.size()));
  for (int32_t s = 0; s < spec.shards; ++s)
    out.to_shards.push_back(
      split_subnet(subnet, spec.shape, partition, spec.worker, s, spec.shards));
  return out;
}

template <>
model::ist::evaluation neuron_scheme::evaluate(worker_model& m, const worker_settings& spec,
                                               const std::vector<std::vector<at::Tensor>>& owned,
                                               const model::dataset& test) {
  for (int32_t s = 0; s < spec.shards; ++s)
    put_pieces(m.whole, m.whole_partition, 0,
               model::ist::shard_pieces(spec.shape, m.whole_partition, 0, s, spec.shards),
               owned[static_cast<size_t>(s)]);
  return model::ist::evaluate(m.whole, test, spec.eval_batch);
}

template <>
messages::named_figure neuron_scheme::worker_figure(const worker_model&,
                                                    const worker_settings& spec) {
  return {"formula_bytes_per_round", model::ist::bytes_formula(spec.shape, spec.workers)};
}

template <>
std::string neuron_scheme::digest(const worker_model& m) {
  return model::ist::digest(m.whole);
}

// -- the scheme: a shard -------------------------------------------------------------------

template <>
neuron_scheme::shard_model neuron_scheme::make_shard(const shard_settings& spec) {
  shard_model m;
  m.whole = model::ist::make_network(spec.shape, spec.seed);
  m.whole_partition = whole_partition(spec.shape);
  m.owned =
    model::ist::shard_pieces(spec.shape, m.whole_partition, 0, spec.shard, spec.shards);
  return m;
}

template <>
void neuron_scheme::put_owned(shard_model& m, const shard_settings&,
                              const std::vector<at::Tensor>& slices) {
  put_pieces(m.whole, m.whole_partition, 0, m.owned, slices); // checks every shape
}

template <>
void neuron_scheme::begin_round(shard_model& m, const shard_settings& spec, int64_t round) {
  m.partition = model::ist::make_partition(spec.shape.hidden, spec.workers, spec.seed, round);
}

template <>
std::vector<at::Tensor> neuron_scheme::round_tensors(shard_model& m, const shard_settings& spec,
                                                     int32_t worker) {
  return take_pieces(
    m.whole, m.partition, worker,
    model::ist::shard_pieces(spec.shape, m.partition, worker, spec.shard, spec.shards));
}

template <>
void neuron_scheme::take_trained(shard_model& m, const shard_settings& spec, int32_t worker,
                                 const std::vector<at::Tensor>& tensors, const std::string&) {
  put_pieces(m.whole, m.partition, worker,
             model::ist::shard_pieces(spec.shape, m.partition, worker, spec.shard,
                                         spec.shards),
             tensors);
}

template <>
void neuron_scheme::end_round(shard_model&, const shard_settings&) {}

template <>
std::vector<at::Tensor> neuron_scheme::owned(const shard_model& m) {
  std::vector<at::Tensor> slices;
  for (auto& t : take_pieces(m.whole, m.whole_partition, 0, m.owned))
    slices.push_back(t.clone());
  return slices;
}

template <>
std::vector<messages::named_figure> neuron_scheme::shard_figures(const shard_model&,
                                                                 const shard_settings& spec) {
  return {{"owned_parameters",
           static_cast<double>(owned_elements(spec.shape, spec.shard, spec.shards))}};
}

// -- the scheme: the local reference ----------------------------------------------------------

template <>
model::ist::result neuron_scheme::run_reference(const model::data_splits& data,
                                                const worker_settings& worker,
                                                const model::selection_spec& selection) {
  auto spec = reference_run<model::ist::settings>(worker, selection);
  spec.shape = worker.shape;
  return model::ist::run_local(data, spec);
}

// -- the scheme: the export ------------------------------------------------------------

template <>
exported_network neuron_scheme::whole_network(const worker_settings& spec,
                                              const std::vector<std::vector<at::Tensor>>& owned) {
  auto whole = model::ist::make_network(spec.shape, spec.data.plan.seed);
  const auto partition = whole_partition(spec.shape);
  for (int32_t s = 0; s < spec.shards; ++s)
    put_pieces(whole, partition, 0,
               model::ist::shard_pieces(spec.shape, partition, 0, s, spec.shards),
               owned.at(static_cast<size_t>(s)));
  // IST's mlp as layers (model/ist_mlp/mlp.hpp): its parameters are the
  // network's, in parameters() order; its forward is ist::forward's.
  model::model_spec layers;
  layers.name = model::ist::mlp_name;
  layers.in_channels = spec.shape.inputs; // flattened: any [B, ...] of that many values
  layers.in_height = 1;
  layers.in_width = 1;
  layers.hidden = spec.shape.hidden;
  layers.classes = spec.shape.classes;
  layers.seed = spec.data.plan.seed;
  auto m = model::ist::make_mlp(layers);
  torch::NoGradGuard no_grad;
  auto params = m.parameters();
  const auto values = whole.parameters();
  if (params.size() != values.size())
    throw model::error("ist: the network has " + std::to_string(values.size()) +
                       " tensors, its layers " + std::to_string(params.size()));
  for (size_t i = 0; i < params.size(); ++i)
    params[i].copy_(values[i]);
  return {std::move(m), {}};
}

template <>
std::vector<std::vector<at::Tensor>> neuron_scheme::owned_pieces(const model::ist::result& result,
                                                                 const worker_settings& spec) {
  const auto partition = whole_partition(spec.shape);
  std::vector<std::vector<at::Tensor>> out;
  for (int32_t s = 0; s < spec.shards; ++s)
    out.push_back(take_pieces(result.network, partition, 0,
                              model::ist::shard_pieces(spec.shape, partition, 0, s, spec.shards)));
  return out;
}

// The roles, the settings codec, the plan and the local reference of this
// scheme (worker.hpp, shard.hpp, role_settings_yaml.hpp, job.hpp).
template struct subnet_scheme<mlp_neurons>;

} // namespace ist
} // namespace modes
} // namespace baton::actors

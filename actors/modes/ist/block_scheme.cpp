#include "actors/modes/ist/block_scheme.hpp"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "actors/modes/ist/job.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/shard.hpp"
#include "actors/modes/ist/role_settings_yaml.hpp"
#include "actors/modes/ist/worker.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

block_layout make_block_layout(const model::layered_model& m, int32_t shards) {
  if (shards < 1)
    throw model::error("resist: expected at least one shard");
  block_layout out;
  out.layers = m.size();
  out.partitioned = model::ist::resist_partitioned_layers(m);
  out.state_layers = model::ist::resist_state_layers(m);
  const auto state = m.state();
  int64_t total = 0;
  for (const auto& t : state)
    total += static_cast<int64_t>(t.nbytes());
  out.bounds.assign(static_cast<size_t>(shards) + 1, state.size());
  out.bounds[0] = 0;
  int64_t offset = 0;
  int32_t shard = 0; // the shard of the tensor at `offset`
  for (size_t k = 0; k < state.size(); ++k) {
    const auto owner = static_cast<int32_t>(offset * shards / std::max<int64_t>(total, 1));
    while (shard < owner) // shards skipped by a large tensor own nothing
      out.bounds[static_cast<size_t>(++shard)] = k;
    offset += static_cast<int64_t>(state[k].nbytes());
  }
  return out;
}

std::vector<size_t> message_tensors(const block_layout& layout,
                                    const model::ist::resist_deal& deal, int32_t worker,
                                    int32_t shard, bool whole) {
  const auto active =
    model::ist::resist_active_layers(layout.layers, layout.partitioned, deal, worker);
  std::vector<size_t> out;
  const auto s = static_cast<size_t>(shard);
  for (size_t k = layout.bounds.at(s); k < layout.bounds.at(s + 1); ++k)
    if (whole || active[layout.state_layers[k]])
      out.push_back(k);
  return out;
}

void check_block_tensors(const std::vector<at::Tensor>& values,
                         const std::vector<at::Tensor>& state,
                         const std::vector<size_t>& indices, const std::string& what) {
  if (values.size() != indices.size())
    throw model::error(what + ": " + std::to_string(values.size()) + " tensors, expected " +
                       std::to_string(indices.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& like = state.at(indices[i]);
    if (!values[i].defined() || values[i].sizes() != like.sizes() ||
        values[i].scalar_type() != like.scalar_type())
      throw model::error(what + ": tensor " + std::to_string(i) + " (state tensor " +
                         std::to_string(indices[i]) + ") does not have the network's shape " +
                         "and type");
  }
}

// -- the scheme: settings ----------------------------------------------------------------

namespace {

/// Shard `shard`'s range of the state.
std::vector<size_t> range_of(const block_layout& layout, int32_t shard) {
  std::vector<size_t> out;
  const auto s = static_cast<size_t>(shard);
  for (size_t k = layout.bounds.at(s); k < layout.bounds.at(s + 1); ++k)
    out.push_back(k);
  return out;
}

/// Copies `values` (checked against `indices` of the state) into the network.
void copy_in(model::layered_model& network, const std::vector<at::Tensor>& values,
             const std::vector<size_t>& indices, const std::string& what) {
  auto target = network.state();
  check_block_tensors(values, target, indices, what);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < indices.size(); ++i)
    target[indices[i]].copy_(values[i]);
}

model::ist::resist_deal deal_of(const block_layout& layout, int32_t workers, uint64_t seed,
                                int64_t round) {
  return model::ist::make_resist_deal(layout.partitioned.size(), workers, seed, round);
}

} // namespace

template <>
resnet_shape block_scheme::shape_of(const topology& t, const model::task& task) {
  return {t.sample_shape.at(0), task.classes};
}

template <>
std::string block_scheme::misfit(const shape&, int32_t, int32_t) {
  return ""; // every worker runs the shared layers, every shard owns a range
}

template <>
caf::error block_scheme::check_plan(const topology&, const shape&, int32_t) {
  return {};
}

// -- the scheme: a worker ------------------------------------------------------------------

template <>
block_scheme::worker_model block_scheme::make_worker(const worker_settings& spec) {
  worker_model m;
  m.network = model::ist::make_resist_network(spec.shape.in_channels, spec.shape.classes,
                                         spec.data.plan.seed);
  m.layout = make_block_layout(m.network, spec.shards);
  return m;
}

template <>
std::string block_scheme::check_samples(const shape& x, const model::dataset& data) {
  if (data.size() == 0 || (data.images.dim() == 4 && data.images.size(1) == x.in_channels))
    return "";
  return "samples of shape " + c10::str(data.images.sizes().slice(1)) + ", expected " +
         std::to_string(x.in_channels) + " channels x height x width";
}

template <>
trained_round block_scheme::train(worker_model& m, const worker_settings& spec, int64_t round,
                                  int32_t epoch,
                                  const std::vector<std::vector<at::Tensor>>& from_shards,
                                  const model::dataset& data,
                                  const std::vector<std::vector<int64_t>>& minibatches) {
  const auto deal = deal_of(m.layout, spec.workers, spec.data.plan.seed, round);
  const bool whole = round == spec.recovery.restore_step;
  for (int32_t s = 0; s < spec.shards; ++s)
    copy_in(m.network, from_shards[static_cast<size_t>(s)],
            message_tensors(m.layout, deal, spec.worker, s, whole),
            shard_name(s) + "'s state");
  const auto active =
    model::ist::resist_active_layers(m.layout.layers, m.layout.partitioned, deal, spec.worker);
  trained_round out;
  out.steps =
    model::ist::resist_local_steps(m.network, active, data, minibatches, epoch, spec.optimizer,
                                   schedule_of(spec, round, data.size()));
  const auto state = m.network.state();
  for (int32_t s = 0; s < spec.shards; ++s) {
    out.to_shards.emplace_back();
    for (size_t k : message_tensors(m.layout, deal, spec.worker, s, false))
      out.to_shards.back().push_back(state[k].detach());
  }
  return out;
}

template <>
model::ist::evaluation block_scheme::evaluate(worker_model& m, const worker_settings& spec,
                                              const std::vector<std::vector<at::Tensor>>& owned,
                                              const model::dataset& test) {
  for (int32_t s = 0; s < spec.shards; ++s)
    copy_in(m.network, owned[static_cast<size_t>(s)], range_of(m.layout, s),
            shard_name(s) + "'s owned tensors");
  const auto scale = model::ist::resist_eval_scale(m.layout.partitioned.size(), spec.workers);
  const auto e =
    model::ist::resist_evaluate(m.network, m.layout.partitioned, scale, test, spec.eval_batch);
  return {e.loss, e.accuracy, test.size()};
}

template <>
messages::named_figure block_scheme::worker_figure(const worker_model& m,
                                                   const worker_settings&) {
  return {"model_bytes", static_cast<double>(tensor_bytes(m.network.state()))};
}

template <>
std::string block_scheme::digest(const worker_model& m) {
  return model::weights_digest(m.network);
}

// -- the scheme: a shard -------------------------------------------------------------------

template <>
block_scheme::shard_model block_scheme::make_shard(const shard_settings& spec) {
  auto network =
    model::ist::make_resist_network(spec.shape.in_channels, spec.shape.classes, spec.seed);
  shard_model m;
  m.layout = make_block_layout(network, spec.shards);
  const auto initial = network.state();
  m.state.resize(initial.size());
  for (size_t k : range_of(m.layout, spec.shard))
    m.state[k] = initial[k].detach().clone();
  return m;
}

template <>
void block_scheme::put_owned(shard_model& m, const shard_settings& spec,
                             const std::vector<at::Tensor>& tensors) {
  const auto range = range_of(m.layout, spec.shard);
  check_block_tensors(tensors, m.state, range, "its checkpoint");
  for (size_t i = 0; i < range.size(); ++i)
    m.state[range[i]] = tensors[i];
}

template <>
void block_scheme::begin_round(shard_model& m, const shard_settings& spec, int64_t round) {
  m.deal = deal_of(m.layout, spec.workers, spec.seed, round);
  m.round = round;
  m.trained.assign(static_cast<size_t>(spec.workers), {});
}

template <>
std::vector<at::Tensor> block_scheme::round_tensors(shard_model& m, const shard_settings& spec,
                                                    int32_t worker) {
  const bool whole = m.round == spec.recovery.restore_step;
  std::vector<at::Tensor> tensors;
  for (size_t k : message_tensors(m.layout, m.deal, worker, spec.shard, whole))
    tensors.push_back(m.state[k]); // never written in place: a merge makes new tensors
  return tensors;
}

template <>
void block_scheme::take_trained(shard_model& m, const shard_settings& spec, int32_t worker,
                                const std::vector<at::Tensor>& tensors,
                                const std::string& from) {
  check_block_tensors(tensors, m.state,
                      message_tensors(m.layout, m.deal, worker, spec.shard, false),
                      from + "'s trained tensors");
  m.trained[static_cast<size_t>(worker)] = tensors;
}

template <>
void block_scheme::end_round(shard_model& m, const shard_settings& spec) {
  torch::NoGradGuard no_grad;
  std::vector<size_t> next(m.trained.size(), 0); // each worker's next tensor
  std::vector<std::vector<size_t>> sent;
  for (int32_t w = 0; w < spec.workers; ++w)
    sent.push_back(message_tensors(m.layout, m.deal, w, spec.shard, false));
  for (size_t k : range_of(m.layout, spec.shard)) {
    std::vector<at::Tensor> values;
    for (size_t w = 0; w < sent.size(); ++w)
      if (next[w] < sent[w].size() && sent[w][next[w]] == k)
        values.push_back(m.trained[w][next[w]++]);
    m.state[k] = model::ist::resist_average(values); // a new tensor: sent ones stay as they were
  }
  m.trained.assign(m.trained.size(), {});
}

template <>
std::vector<at::Tensor> block_scheme::owned(const shard_model& m) {
  std::vector<at::Tensor> out;
  for (const auto& t : m.state)
    if (t.defined()) // its range
      out.push_back(t);
  return out;
}

template <>
std::vector<messages::named_figure> block_scheme::shard_figures(const shard_model& m,
                                                                const shard_settings&) {
  const auto tensors = owned(m);
  return {{"owned_tensors", static_cast<double>(tensors.size())},
          {"owned_bytes", static_cast<double>(tensor_bytes(tensors))}};
}

// -- the scheme: the local reference ----------------------------------------------------------

template <>
model::ist::resist_result block_scheme::run_reference(const model::data_splits& data,
                                                      const worker_settings& worker,
                                                      const model::selection_spec& selection) {
  auto spec = reference_run<model::ist::resist_settings>(worker, selection);
  spec.in_channels = worker.shape.in_channels;
  spec.classes = worker.shape.classes;
  return model::ist::run_resist_local(data, spec);
}

// -- the scheme: the export ------------------------------------------------------------

template <>
exported_network block_scheme::whole_network(const worker_settings& spec,
                                             const std::vector<std::vector<at::Tensor>>& owned) {
  auto m = make_worker(spec);
  for (int32_t s = 0; s < spec.shards; ++s)
    copy_in(m.network, owned.at(static_cast<size_t>(s)), range_of(m.layout, s),
            shard_name(s) + "'s owned tensors");
  // The evaluation scales the partitioned blocks' residual branch.
  exported_network out{std::move(m.network), {}};
  const auto scale = model::ist::resist_eval_scale(m.layout.partitioned.size(), spec.workers);
  for (size_t layer : m.layout.partitioned)
    out.options.residual_scales[out.model.layers().at(layer).name] = scale;
  return out;
}

template <>
std::vector<std::vector<at::Tensor>> block_scheme::owned_pieces(
  const model::ist::resist_result& result, const worker_settings& spec) {
  const auto layout = make_block_layout(result.network, spec.shards);
  const auto state = result.network.state();
  std::vector<std::vector<at::Tensor>> out;
  for (int32_t s = 0; s < spec.shards; ++s) {
    out.emplace_back();
    for (size_t k : range_of(layout, s))
      out.back().push_back(state[k].detach());
  }
  return out;
}

// The roles, the settings codec, the plan and the local reference of this
// scheme (worker.hpp, shard.hpp, role_settings_yaml.hpp, job.hpp).
template struct subnet_scheme<resnet_blocks>;

} // namespace ist
} // namespace modes
} // namespace baton::actors

#include "model/planning/partitioner.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model/core/error.hpp"

namespace baton::model {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

/// Sums over layer ranges in O(1): entry k is the sum over layers [0, k).
struct prefix_sums {
  std::vector<double> compute, parameters, activations;

  explicit prefix_sums(const std::vector<layer_cost>& layers) {
    compute.assign(layers.size() + 1, 0.0);
    parameters.assign(layers.size() + 1, 0.0);
    activations.assign(layers.size() + 1, 0.0);
    for (size_t k = 0; k < layers.size(); ++k) {
      compute[k + 1] = compute[k] + training_seconds(layers[k]);
      parameters[k + 1] = parameters[k] + static_cast<double>(layers[k].parameter_bytes);
      activations[k + 1] = activations[k] + static_cast<double>(layers[k].activation_bytes);
    }
  }
};

/// PipeDream's data-parallel weight synchronisation for `replicas` replicas
/// of `bytes` of parameters: a ring all-reduce moves 2(r-1)/r of them out and
/// as much in, 4(r-1)|w|/(r B) seconds.
double weight_sync(double bytes, int32_t replicas, double bandwidth) {
  return 4.0 * (replicas - 1) * bytes / (replicas * bandwidth);
}

/// Times a stage's output crosses its link per microbatch: the activation
/// forward and, when training, its gradient back.
double link_crossings(bool forward_only) {
  return forward_only ? 1.0 : 2.0;
}

/// T(i -> j, r) of the paper, from prefix sums.
double stage_time(const prefix_sums& sums, size_t begin, size_t end, int32_t replicas,
                  double bandwidth) {
  const double compute = sums.compute[end] - sums.compute[begin];
  const double sync =
    weight_sync(sums.parameters[end] - sums.parameters[begin], replicas, bandwidth);
  return std::max(compute, sync) / replicas;
}

/// A stage's memory per machine: every in-flight microbatch stashes a weight
/// version and the activations of the stage's layers (PipeDream's NOAM).
double stage_memory(const prefix_sums& sums, size_t begin, size_t end, int32_t in_flight) {
  return (sums.parameters[end] - sums.parameters[begin] + sums.activations[end] -
          sums.activations[begin]) *
         in_flight;
}

// -- the dynamic program ------------------------------------------------------------
//
// PipeDream's recurrence runs over prefixes, A(j, m), and takes the last
// stage's cost as known. The memory of a stage, though, depends on how many
// stages follow it (the microbatches in flight under 1F1B), which a prefix
// does not know. So the same recurrence runs over suffixes and also counts
// stages: best(s, i, m) = the smallest slowest-stage time for layers [i, L)
// on at most m machines in exactly s stages, where the first stage [i, j)
// has s microbatches in flight:
//   best(1, i, m) = min_r T(i -> L, r)
//   best(s, i, m) = min_{j, r} max(T(i -> j, r), 2 a_{j-1} / B, best(s-1, j, m-r))
// over stages that fit the memory limit (a_{j-1} / B for frozen, forward-only
// stages). The objective is a maximum of terms that each depend on one stage
// or one boundary, so the recurrence is exact. With `options.stages` set, only
// best(stages, 0, M) is a candidate answer.

struct choice {
  size_t end = 0;
  int32_t replicas = 0;
};

class planner {
public:
  planner(const std::vector<layer_cost>& layers, const partition_options& options)
      : layers_(layers), options_(options), sums_(layers), layer_count_(layers.size()),
        machines_(static_cast<size_t>(options.machines)),
        max_stages_(options.stages > 0 ? static_cast<size_t>(options.stages)
                                       : std::min(layer_count_, machines_)),
        min_stages_(options.stages > 0 ? max_stages_ : 1) {
    const size_t cells = (max_stages_ + 1) * (layer_count_ + 1) * (machines_ + 1);
    best_.assign(cells, infinity);
    choice_.assign(cells, choice{});
  }

  partition_plan run() {
    for (size_t stages = 1; stages <= max_stages_; ++stages)
      for (size_t begin = 0; begin + stages <= layer_count_; ++begin)
        for (size_t machines = stages; machines <= machines_; ++machines)
          solve(stages, begin, machines);
    size_t best_stages = 0;
    double best = infinity;
    for (size_t stages = min_stages_; stages <= max_stages_; ++stages)
      if (at(stages, 0, machines_) < best) {
        best = at(stages, 0, machines_);
        best_stages = stages;
      }
    if (best_stages == 0)
      throw error(infeasible_message());
    return reconstruct(best_stages);
  }

private:
  double& at(size_t stages, size_t begin, size_t machines) {
    return best_[(stages * (layer_count_ + 1) + begin) * (machines_ + 1) + machines];
  }
  choice& choice_at(size_t stages, size_t begin, size_t machines) {
    return choice_[(stages * (layer_count_ + 1) + begin) * (machines_ + 1) + machines];
  }

  int32_t max_replicas(size_t machines_left) const {
    return options_.straight ? 1 : static_cast<int32_t>(machines_left);
  }

  void solve(size_t stages, size_t begin, size_t machines) {
    double& best = at(stages, begin, machines);
    choice& chosen = choice_at(stages, begin, machines);
    const auto in_flight = static_cast<int32_t>(stages);
    // The first stage leaves at least one layer and one machine to each later stage.
    const size_t last_end = layer_count_ - (stages - 1);
    const size_t first_end = stages == 1 ? layer_count_ : begin + 1;
    for (size_t end = first_end; end <= last_end; ++end) {
      if (stage_memory(sums_, begin, end, in_flight) > options_.memory)
        break; // longer stages only hold more
      if (stages > 1 && end < options_.joined.size() && options_.joined[end])
        continue; // the layers on both sides share a parameter
      const double link = stages == 1 ? 0.0
                                      : link_crossings(options_.forward_only) *
                                          static_cast<double>(layers_[end - 1].activation_bytes) /
                                          options_.bandwidth;
      const int32_t replicas_limit = max_replicas(machines - (stages - 1));
      for (int32_t r = 1; r <= replicas_limit; ++r) {
        double rest = 0.0;
        if (stages > 1) {
          rest = at(stages - 1, end, machines - static_cast<size_t>(r));
          if (rest == infinity)
            continue;
        }
        const double value =
          std::max({stage_time(sums_, begin, end, r, options_.bandwidth), link, rest});
        if (value < best) {
          best = value;
          chosen = {end, r};
        }
      }
    }
  }

  partition_plan reconstruct(size_t stages) {
    std::vector<std::pair<size_t, int32_t>> ends;
    size_t begin = 0, machines = machines_;
    for (size_t s = stages; s >= 1; --s) {
      const choice c = choice_at(s, begin, machines);
      ends.emplace_back(c.end, c.replicas);
      begin = c.end;
      machines -= static_cast<size_t>(c.replicas);
    }
    return evaluate_partition(layers_, ends, options_.bandwidth, options_.forward_only);
  }

  std::string infeasible_message() const {
    // Even the smallest demand, the last layer alone as the last stage (one
    // microbatch in flight), may not fit: say how far off the limit is.
    size_t heaviest = 0;
    for (size_t k = 0; k < layer_count_; ++k)
      if (stage_memory(sums_, k, k + 1, 1) > stage_memory(sums_, heaviest, heaviest + 1, 1))
        heaviest = k;
    std::ostringstream out;
    out << "no partition of the " << layer_count_ << " layers over at most " << machines_
        << " machine(s) fits in " << static_cast<int64_t>(options_.memory)
        << " bytes per machine (layer '" << layers_[heaviest].name << "' alone needs "
        << static_cast<int64_t>(stage_memory(sums_, heaviest, heaviest + 1, 1))
        << " bytes with one microbatch in flight; stages earlier in the pipeline hold more)";
    return out.str();
  }

  const std::vector<layer_cost>& layers_;
  const partition_options& options_;
  prefix_sums sums_;
  size_t layer_count_, machines_, max_stages_;
  size_t min_stages_; ///< options.stages when set (then also max_stages_), else 1
  std::vector<double> best_;
  std::vector<choice> choice_;
};

} // namespace

double stage_plan::stage_seconds() const {
  return std::max(compute_seconds, weight_sync_seconds);
}

std::string partition_plan::notation() const {
  std::string out;
  for (const auto& s : stages)
    out += (out.empty() ? "" : "-") + std::to_string(s.replicas);
  return out;
}

int32_t partition_plan::machines_used() const {
  int32_t n = 0;
  for (const auto& s : stages)
    n += s.replicas;
  return n;
}

stage_plan evaluate_stage(const std::vector<layer_cost>& layers, size_t begin, size_t end,
                          int32_t replicas, int32_t stages_after, double bandwidth,
                          bool forward_only) {
  stage_plan s;
  s.begin = begin;
  s.end = end;
  s.replicas = replicas;
  s.in_flight = stages_after + 1;
  double compute = 0, parameters = 0, activations = 0;
  for (size_t k = begin; k < end; ++k) {
    compute += training_seconds(layers[k]);
    parameters += static_cast<double>(layers[k].parameter_bytes);
    activations += static_cast<double>(layers[k].activation_bytes);
  }
  s.compute_seconds = compute / replicas;
  s.weight_sync_seconds = weight_sync(parameters, replicas, bandwidth) / replicas;
  s.output_seconds = stages_after == 0 ? 0.0
                                       : link_crossings(forward_only) *
                                           static_cast<double>(layers[end - 1].activation_bytes) /
                                           bandwidth;
  s.memory_bytes = (parameters + activations) * s.in_flight;
  return s;
}

namespace {

/// The slowest of a plan's stages and links.
double slowest_of(const partition_plan& plan) {
  double slowest = 0;
  for (const auto& s : plan.stages)
    slowest = std::max({slowest, s.stage_seconds(), s.output_seconds});
  return slowest;
}

} // namespace

partition_plan evaluate_partition(const std::vector<layer_cost>& layers,
                                  const std::vector<std::pair<size_t, int32_t>>& stage_ends,
                                  double bandwidth, bool forward_only) {
  partition_plan plan;
  size_t begin = 0;
  const auto count = static_cast<int32_t>(stage_ends.size());
  for (int32_t k = 0; k < count; ++k) {
    const auto [end, replicas] = stage_ends[static_cast<size_t>(k)];
    plan.stages.push_back(
      evaluate_stage(layers, begin, end, replicas, count - 1 - k, bandwidth, forward_only));
    begin = end;
  }
  plan.slowest_seconds = slowest_of(plan);
  return plan;
}

void hand_on_weight_gradients(const std::vector<layer_cost>& layers, partition_plan& plan,
                              double bandwidth, bool forward_only) {
  if (forward_only)
    return; // nothing computes a gradient
  for (size_t k = 0; k + 1 < plan.stages.size(); ++k) {
    auto& here = plan.stages[k];
    auto& next = plan.stages[k + 1];
    const auto& last = layers[here.end - 1];
    const double moved = last.weight_gradient_seconds;
    if (moved <= 0 || here.weight_gradient_next || here.replicas != 1 || next.replicas != 1 ||
        here.end - here.begin < 2) // its input is the previous stage's output: the link's
      continue;
    const double extra_bytes = static_cast<double>(layers[here.end - 2].activation_bytes) +
                               static_cast<double>(last.parameter_bytes);
    const double output = here.output_seconds + extra_bytes / bandwidth;
    const double before = std::max({here.stage_seconds(), next.stage_seconds(),
                                    here.output_seconds});
    const double after = std::max({std::max(here.compute_seconds - moved, here.weight_sync_seconds),
                                   std::max(next.compute_seconds + moved, next.weight_sync_seconds),
                                   output});
    if (!(after < before))
      continue;
    here.compute_seconds -= moved;
    next.compute_seconds += moved;
    here.output_seconds = output;
    here.weight_gradient_next = true;
  }
  plan.slowest_seconds = slowest_of(plan);
}

bool feasible(const partition_plan& plan, const partition_options& options) {
  if (plan.machines_used() > options.machines)
    return false;
  for (const auto& s : plan.stages)
    if (s.memory_bytes > options.memory || (options.straight && s.replicas != 1))
      return false;
  return true;
}

partition_plan plan_partition(const std::vector<layer_cost>& layers,
                              const partition_options& options) {
  if (layers.empty())
    throw error("cannot plan a pipeline for a model without layers");
  if (options.machines < 1)
    throw error("cannot plan a pipeline on " + std::to_string(options.machines) +
                " machines, expected at least 1");
  if (!(options.bandwidth > 0))
    throw error("expected a bandwidth > 0 bytes/s");
  if (options.stages < 0 || options.stages > options.machines ||
      static_cast<size_t>(options.stages) > layers.size())
    throw error("cannot split " + std::to_string(layers.size()) + " layers into " +
                std::to_string(options.stages) + " stages on " +
                std::to_string(options.machines) +
                " machines: expected 1 to min(layers, machines) stages, or 0 for any");
  auto plan = planner(layers, options).run();
  if (options.hand_on_weight_gradients)
    hand_on_weight_gradients(layers, plan, options.bandwidth, options.forward_only);
  return plan;
}

} // namespace baton::model

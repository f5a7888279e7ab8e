#pragma once

// Profile-driven partitioning of a layered model into pipeline stages:
// PipeDream's dynamic program (Narayanan et al., SOSP'19, section 3.1) over
// layers and machines, with stage replication, the communication cost of
// activations between stages and of weight synchronisation among replicas,
// and an optional per-machine memory limit. Pure arithmetic: no torch, no
// actors, so it is tested against brute force on small instances.
//
// Units: seconds and bytes. Times are per microbatch, the unit the profiler
// measures and a pipeline admits (PipeDream's "minibatch").

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace baton::model {

/// What one layer costs, for one microbatch (from `baton profile`).
struct layer_cost {
  std::string name;
  double forward_seconds = 0;
  double backward_seconds = 0;
  int64_t activation_bytes = 0; ///< the layer's output for one microbatch
  int64_t parameter_bytes = 0;
  /// One optimiser step of the layer's parameters (0 without parameters).
  double update_seconds = 0;
  /// The part of backward_seconds the next stage can compute instead when a
  /// stage ends with this layer (`weight_gradient: next`: a convolution's
  /// weight gradient, model/core/stage_trainer.hpp); 0 for other layers.
  double weight_gradient_seconds = 0;
};

/// What a layer costs a training stage per microbatch: forward, backward
/// and one optimiser step, as under 1F1B, which steps after every
/// microbatch (plans are made for 1F1B; a flush schedule steps once per
/// minibatch, which this overestimates a little).
inline double training_seconds(const layer_cost& l) {
  return l.forward_seconds + l.backward_seconds + l.update_seconds;
}

/// The machine model and the constraints of a plan.
struct partition_options {
  int32_t machines = 1;     ///< at most this many machines are used
  double bandwidth = 1e9;   ///< bytes per second between any two machines
  /// Bytes a machine may hold for its stage (stashed weight versions and
  /// activations); infinity = unlimited.
  double memory = std::numeric_limits<double>::infinity();
  bool straight = false;    ///< no replication: every stage on one machine
  /// Exactly this many stages (0 = the fastest number of stages up to
  /// `machines`); at most `machines` and the number of layers.
  int32_t stages = 0;
  /// Frozen stages (forward only): a link carries each activation once;
  /// training sends it forward and its gradient back, twice.
  bool forward_only = false;
  /// joined[k]: no stage boundary between layers k - 1 and k (they share a
  /// parameter, tied weights, which one stage must hold); shorter than the
  /// layers (or empty): the rest may be cut anywhere.
  std::vector<bool> joined;
  /// Then hand on the weight gradients where that helps
  /// (hand_on_weight_gradients; `baton plan --weight-gradient next`). Off by
  /// default: the balance it gives showed in measured throughput on one host
  /// and not on another (docs/pipeline.md: a 2-stage 1F1B's first stage also
  /// waits for the second stage's forward and backward of each microbatch,
  /// which it does not shorten, and the weight half computed apart costs a
  /// little more than inside the backward).
  bool hand_on_weight_gradients = false;
};

/// One stage of a plan: layers [begin, end) on `replicas` machines.
struct stage_plan {
  size_t begin = 0;
  size_t end = 0;
  int32_t replicas = 1;
  /// Microbatches in flight at this stage under 1F1B: the number of stages
  /// from it to the end (PipeDream's NOAM for an unreplicated input stage).
  int32_t in_flight = 1;
  double compute_seconds = 0;         ///< (forward + backward + update) / replicas
  double weight_sync_seconds = 0;     ///< all-reduce among replicas / replicas
  /// 2 x output activation / bandwidth (1 x when forward-only; 0 for the last stage)
  double output_seconds = 0;
  double memory_bytes = 0;            ///< per machine: (parameters + activations) x in_flight
  /// The next stage computes the weight gradient of this stage's last layer
  /// (hand_on_weight_gradients): compute_seconds is without it, the next
  /// stage's with it, output_seconds with the layer's input and its weight
  /// gradient on the link.
  bool weight_gradient_next = false;
  /// max(compute, weight sync): what PipeDream's T(i->j, m) is for this stage.
  double stage_seconds() const;
};

/// A partition: stages in order, covering every layer.
struct partition_plan {
  std::vector<stage_plan> stages;
  /// The predicted time per microbatch of the slowest stage or link: the
  /// pipeline's steady-state time between two microbatches.
  double slowest_seconds = 0;

  /// PipeDream's notation: replicas per stage, "2-1-1".
  std::string notation() const;
  int32_t machines_used() const;
};

/// Fills a stage's figures (compute, sync, output, memory) from the layer
/// costs; `stages_after` is the number of stages that follow it.
stage_plan evaluate_stage(const std::vector<layer_cost>& layers, size_t begin, size_t end,
                          int32_t replicas, int32_t stages_after, double bandwidth,
                          bool forward_only = false);

/// The figures of a whole partition (stage boundaries and replicas given),
/// as the planner predicts them. Precondition: the stages are contiguous and
/// cover [0, layers.size()).
partition_plan evaluate_partition(const std::vector<layer_cost>& layers,
                                  const std::vector<std::pair<size_t, int32_t>>& stage_ends,
                                  double bandwidth, bool forward_only = false);

/// Moves the weight gradient of a stage's last layer to the next stage
/// (`weight_gradient: next`) at each boundary, first to last, where that
/// lowers the slower of the two stages and the link between them, both
/// stages unreplicated; the plan's figures follow. Plans stay as they were
/// where no layer has a weight_gradient_seconds.
void hand_on_weight_gradients(const std::vector<layer_cost>& layers, partition_plan& plan,
                              double bandwidth, bool forward_only = false);

/// True when every stage of `plan` fits the options (memory, machines,
/// straight).
bool feasible(const partition_plan& plan, const partition_options& options);

/// The partition with the smallest slowest-stage time over every contiguous
/// split and replica assignment with at most `machines` machines in all (on
/// ties: fewer stages, then earlier stage ends and fewer replicas in the
/// first stage), or over exactly `options.stages` stages, then with the
/// weight gradients handed on where that helps when the options ask
/// (hand_on_weight_gradients; not when forward_only). Runs in O(L^2 M^3)
/// for L layers and M machines. Throws model::error when no partition fits (no
/// layers, fewer than one machine, a bandwidth <= 0, a stage count out of
/// range, or no stages within the memory limit).
partition_plan plan_partition(const std::vector<layer_cost>& layers,
                              const partition_options& options);

} // namespace baton::model

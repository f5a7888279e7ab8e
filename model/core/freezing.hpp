#pragma once

// Layer freezing, free of actors: the adaptive rule of AutoFreeze (Liu et
// al., 2021) as a plain-data class fed with gradient norms, the per-group
// accumulation of gradients over an interval that produces those norms, and
// the freeze point of a model (the prefix that runs forward only).
//
// The decision is global: it is taken where the workers' gradients meet (the
// shards or the ring's reduced buckets), on the reduced gradient, so every
// worker freezes the same prefix at the same step.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/layered_model.hpp"

namespace baton::model {

/// One evaluation of the rule, for the log and the metrics JSON.
struct freeze_decision {
  int64_t step = 0;               ///< the global step after which it was taken
  int32_t frozen_before = 0;      ///< groups frozen before it
  int32_t frozen_after = 0;       ///< groups frozen after it (>= frozen_before)
  std::string layer;              ///< last layer of the frozen prefix ("" for none)
  std::vector<double> rates;      ///< change rate per unfrozen group, from frozen_before on
  double threshold = 0;           ///< the percentile of `rates`
};

/// AutoFreeze's rule. Groups are the freezable layer groups in model order
/// (the classifier is not one); freezing group g freezes every group before
/// it too. Every `interval` steps the caller passes each group's L1 norm of
/// the gradient accumulated over the interval; the change rate of an
/// unfrozen group is |previous - current| / previous (0 when both are 0,
/// infinite when only previous is); the threshold is the `percentile` of the
/// unfrozen groups' rates (linear interpolation, as numpy.percentile); the
/// leading unfrozen groups whose rate is below the threshold are frozen,
/// stopping at the first one at or above it. It never unfreezes, and freezes
/// at most max_frozen groups. The first interval only records norms.
class adaptive_freezer {
public:
  /// `groups`: a name per freezable group (its last layer). Throws
  /// model::error on no groups, interval < 1, a percentile outside
  /// [0, 100] or max_frozen > groups.
  adaptive_freezer(std::vector<std::string> groups, adaptive_freeze_options options);

  /// Whether global step `step` (0-based) ends an interval.
  bool due(int64_t step) const;

  /// Evaluates the rule after step `step` with the interval's L1 norms (one
  /// per group, frozen ones ignored). Returns the decision, or nothing on the
  /// first interval (no previous norms). Throws model::error when
  /// norms.size() differs from the number of groups.
  std::optional<freeze_decision> decide(int64_t step, const std::vector<double>& norms);

  /// Groups frozen so far (a prefix of the groups).
  int32_t frozen() const { return frozen_; }

  /// What a checkpoint keeps of the rule: the frozen groups and the norms
  /// of the last interval (the next decision's "previous").
  struct state {
    int32_t frozen = 0;
    std::vector<double> previous; ///< empty before the first interval
  };
  state save() const { return {frozen_, previous_}; }
  /// Continues from `s`; throws model::error when it does not fit these
  /// groups (and then changes nothing).
  void restore(const state& s);
  const std::vector<std::string>& groups() const { return groups_; }

private:
  int32_t limit() const;

  std::vector<std::string> groups_;
  adaptive_freeze_options options_;
  std::vector<double> previous_;
  int32_t frozen_ = 0;
};

/// The `p`-th percentile of `values` with linear interpolation between the
/// closest ranks (numpy.percentile's default). Precondition: not empty.
double percentile(std::vector<double> values, double p);

/// Sums the (reduced) gradients of an interval per freezable group and
/// gives their L1 norms: the input of adaptive_freezer::decide.
class interval_gradients {
public:
  /// `group_of[i]`: the group of parameter i (in named_parameters() order),
  /// or -1 for a parameter in no freezable group.
  interval_gradients(std::vector<int32_t> group_of, int32_t groups);
  /// Adds one step's gradients (one per parameter; undefined ones skipped).
  void add(const std::vector<at::Tensor>& gradients);
  /// Per group, the L1 norm of the sum since the last reset.
  std::vector<double> l1_norms() const;
  void reset();

private:
  std::vector<int32_t> group_of_;
  int32_t groups_;
  std::vector<at::Tensor> sums_;
};

/// For each parameter of `m` (named_parameters() order), the index of the
/// group whose layer range holds it (a tied one: its first layer's group): group g is the layers after group
/// g-1's last layer up to and including `group_last_layers[g]`; -1 after
/// the last group. Throws model::error on an unknown or out-of-order name.
std::vector<int32_t> parameter_groups(const layered_model& m,
                                      const std::vector<std::string>& group_last_layers);

/// The freeze point of `up_to` (the last frozen layer): its index + 1, or 0
/// for "". Throws model::error naming the layer when `m` has no such layer.
size_t freeze_point(const layered_model& m, const std::string& up_to);

/// Makes layers [0, point) frozen: no gradient, evaluation mode (batch norm
/// uses and keeps its running statistics), and the rest trainable in
/// training mode. A parameter tied between a frozen layer and a later one is
/// frozen: freezing a layer freezes its parameters wherever else they are used.
void apply_freeze_point(const layered_model& m, size_t point);

/// Names of the layers of `prefix` whose output for a sample depends on the
/// other samples of its batch even in evaluation mode (batch norm without
/// running statistics). A prefix with any cannot be cached per sample.
std::vector<std::string> batch_dependent_layers(const layered_model& prefix);

} // namespace baton::model

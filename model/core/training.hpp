#pragma once

// The training arithmetic as functions of tensors, free of actors: what a
// stage or a head computes, and the `local` reference run that every mode is
// checked and benchmarked against.

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "model/core/layered_model.hpp"
#include "model/core/non_finite.hpp"
#include "model/core/specs.hpp"
#include "model/core/task.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::model {

/// Forward of a frozen model slice: no autograd state is kept.
at::Tensor forward_frozen(const layered_model& m, const at::Tensor& x);

/// A trainable head: its model, loss (cross entropy) and optimiser.
/// Gradients of the microbatches of one minibatch are accumulated and the
/// step is taken after the last one (loss scaled by 1/step_size, so the
/// result equals one step over the whole minibatch).
class head_trainer {
public:
  head_trainer(layered_model head, task t, optimizer_spec opt);
  ~head_trainer();

  /// Forward + backward of one microbatch; steps the optimiser when
  /// `last_in_step`. Returns the microbatch's mean loss.
  double train(const at::Tensor& features, const at::Tensor& task_labels,
               int32_t step_size, bool last_in_step);

  /// The run's length, for the optimizer's schedule (lr_at); without it a
  /// head steps at optimizer.lr and refuses another schedule.
  void set_schedule(int64_t steps_per_epoch, int64_t epochs);

  /// Number of correct predictions on a batch (no gradient).
  int64_t correct(const at::Tensor& features, const at::Tensor& task_labels);

  const layered_model& model() const { return model_; }
  const task& task_def() const { return task_; }
  /// Optimiser steps taken (the weight version).
  int64_t version() const { return version_; }

  /// Weights, buffers, optimizer state (momentum.<name>; adam and adamw
  /// also second.<name>) and version, for a checkpoint. Call
  /// between steps (no gradient accumulated).
  training_state save_state() const;
  /// Continues from `s`; throws model::error (naming the tensor) when it does
  /// not fit this head, and then changes nothing.
  void restore(const training_state& s);

  /// The name the warning of a first non-finite loss gives this head
  /// (non_finite.hpp); "the head of task T" until set.
  void set_name(const std::string& name) { watch_.set_owner("head '" + name + "'"); }

private:
  layered_model model_;
  task task_;
  non_finite_watch watch_;
  struct optimizer_state;
  std::unique_ptr<optimizer_state> optimizer_;
  int64_t version_ = 0;
};

} // namespace baton::model

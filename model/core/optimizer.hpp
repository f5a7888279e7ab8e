#pragma once

// The optimiser step of one parameter and the learning-rate schedule, free
// of actors: torch.optim's SGD (momentum, Nesterov, weight decay), Adam and
// AdamW (1.13's single-tensor arithmetic: bias correction; Adam adds the
// weight decay to the gradient, AdamW multiplies the parameter by
// 1 - lr x weight_decay first), with the optimiser state as plain data.
// Every strategy steps through these functions, so that a parameter's update
// is the same wherever it is taken (a stage, a replica, a parameter shard's
// slice: the arithmetic is per element). tests/model/core/optimizer_test
// checks them against python3-torch's torch.optim.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/specs.hpp"

namespace baton::model {

/// The names the optimizer section's `name` takes.
inline const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names{"sgd", "adam", "adamw"};
  return names;
}
/// The names the optimizer section's `schedule` takes.
inline const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"constant", "step", "cosine"};
  return names;
}

/// Throws model::error naming the first setting out of range (an unknown
/// name or schedule, lr <= 0, momentum or betas outside [0, 1), eps <= 0,
/// negative weight decay or clip, nesterov without momentum).
void check_optimizer(const optimizer_spec& optimizer);

/// Whether the optimiser keeps a second moment (adam, adamw).
inline bool has_second_moment(const optimizer_spec& o) { return o.name != "sgd"; }

/// One parameter's optimiser state: sgd's momentum buffer (`first`), adam's
/// exp_avg (`first`) and exp_avg_sq (`second`, undefined for sgd), and the
/// steps taken (torch's state['step']; sgd's buffer starts as the first
/// gradient when it is 0).
struct parameter_state {
  at::Tensor first;
  at::Tensor second;
  int64_t steps = 0;
};

/// A fresh state for a parameter like `like`: zeros (the second moment only
/// for adam and adamw), no step.
parameter_state make_parameter_state(const at::Tensor& like, const optimizer_spec& optimizer);

/// One step of one parameter at learning rate `lr` (the schedule's; the
/// spec's lr is not read), out of place: the tensors of the current version
/// stay intact (a pipeline stage stashes them); updates `state` in place
/// and returns the parameter's next value.
at::Tensor optimizer_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                       parameter_state& state, const optimizer_spec& optimizer,
                                       double lr);

/// The same step written into `parameter` itself: the same value, bit for
/// bit, for a parameter nobody else reads while it steps.
void optimizer_step_in_place(at::Tensor& parameter, const at::Tensor& gradient,
                             parameter_state& state, const optimizer_spec& optimizer, double lr);

/// A part of a gradient that is the mean of two workers' values: elements
/// [offset, offset + a.numel()) of the flattened parameter have the gradient
/// (a + b) / workers (1-D float32 views, as two workers' buckets hold them).
struct mean_piece {
  int64_t offset = 0;
  at::Tensor a;
  at::Tensor b;
};

/// optimizer_step_in_place with the gradient given by `pieces` (together
/// each element of `parameter` once), every element's mean taken in the
/// step's own pass: (a + b) then / workers in float32, mean_of_two's bits,
/// so `parameter` and `state` end as optimizer_step_in_place leaves them with
/// that mean in memory, without the pass that would write it. Only where
/// the step is SGD's fused one (no Nesterov, float32 contiguous tensors, a
/// momentum buffer); returns false and changes nothing otherwise. With
/// `next`, the new weights go there (a tensor like `parameter`) and
/// `parameter` stays as it was: optimizer_step_out_of_place's result.
bool sgd_step_of_mean_in_place(at::Tensor& parameter, const std::vector<mean_piece>& pieces,
                               int32_t workers, parameter_state& state,
                               const optimizer_spec& optimizer, double lr,
                               at::Tensor* next = nullptr);

/// torch.nn.utils.clip_grad_norm_ (1.13) over `gradients` (undefined entries
/// are skipped): the total L2 norm N of all of them, each multiplied by
/// min(1, max_norm / (N + 1e-6)); returns new tensors (the inputs are not
/// written). max_norm <= 0 returns the inputs.
std::vector<at::Tensor> clip_grad_norm(const std::vector<at::Tensor>& gradients,
                                       double max_norm);

/// Leaves every parameter's gradient undefined, not zeros (libtorch 1.13's
/// zero_grad writes zeros): the next backward then hands its gradient to the
/// parameter as it is (autograd's AccumulateGrad takes a first gradient
/// over), where zeros cost a pass writing them and one adding onto them
/// (resnet18's 44 MiB twice a microbatch under 1f1b). A sum onto zeros is the
/// gradient itself: the same weights.
void clear_gradients(std::vector<at::Tensor>& parameters);

/// The learning rate of step `step` (0-based, over the whole run of
/// `epochs` x `steps_per_epoch` steps). The peak is `scaled_peak` when it is
/// > 0 (data-parallel's lr_scaling: linear, lr x global / base batch), else
/// optimizer.lr. Warm-up (warmup_epochs x steps_per_epoch steps W): with a
/// scaled peak, from optimizer.lr to the peak, lr + (peak - lr) x step / W (Goyal
/// et al., as data-parallel always did); without, peak x (step + 1) / W. After
/// it: constant keeps the peak; step multiplies it by gamma every step_epochs
/// epochs (torch's StepLR counting whole epochs from the start); cosine
/// anneals it to min_lr over the remaining steps, per step (torch's
/// CosineAnnealingLR with T_max the steps after the warm-up). A pure
/// function: every worker and shard computes the same value. Throws
/// model::error on steps_per_epoch <= 0.
double lr_at(const optimizer_spec& optimizer, int64_t step, int64_t steps_per_epoch,
             int64_t epochs, double scaled_peak = 0);

/// A short description for plans and logs: "adamw lr 0.001 (cosine, warm-up
/// 1 epoch), weight_decay 0.01".
std::string describe(const optimizer_spec& optimizer);

// -- SGD, as every strategy stepped before adam ----------------------------------

/// One SGD step of one parameter, out of place (the tensors of the current
/// version stay intact): updates `momentum` (in place; it becomes the
/// gradient when `first`, as torch::optim::SGD starts its buffer) and
/// returns the next value of `parameter`. torch::optim::SGD's operations in
/// its order per element (float32 tensors in one fused pass, whose rounding
/// may differ from ATen's kernels in the last bit; Nesterov takes ATen's).
at::Tensor sgd_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                 at::Tensor& momentum, const optimizer_spec& optimizer,
                                 bool first);

/// The same step written into `parameter` itself (no new tensor, no copy):
/// the same value, bit for bit, for a parameter nobody else reads while it
/// steps (a data-parallel replica; not a stage's stashed versions).
void sgd_step_in_place(at::Tensor& parameter, const at::Tensor& gradient, at::Tensor& momentum,
                       const optimizer_spec& optimizer, bool first);

} // namespace baton::model

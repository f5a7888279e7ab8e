#pragma once

// The arithmetic of a trainable pipeline stage (PipeDream), free of actors:
// forward keeps what backward needs (the stash) keyed by microbatch id,
// backward produces the gradient for the previous stage, a step makes a new
// weight version. Actors only decide the order (the schedule).
//
// Weight stashing: while a microbatch that ran forward with version v has
// not gone backward, the optimiser updates out of place: the step makes new
// parameter tensors (version v+1) and the tensors of v live on. A step that
// no in-flight microbatch and no vertical sync needs v for updates v's
// tensors in place (the same arithmetic, one buffer less to write). At
// backward, the stage swaps in the parameters of the microbatch's forward
// version, runs autograd, and swaps the current version back: the backward of
// m uses exactly the weights its forward used.
//
// Buffers (batch norm's running_mean, running_var, num_batches_tracked) are
// not parameters and are not versioned: there is one copy, updated in place
// by every training forward, in the order the microbatches arrive (the
// schedule's forward order, which is the source's order on every stage).
// Backward and step never touch them; without stashing, the recomputed
// forward at backward leaves them as they were (the microbatch's statistics
// were taken by its forward, once). infer() runs in evaluation mode: it uses
// the current running statistics and does not change them. A replica of a
// stage keeps its own buffers (gradients are summed in a group, buffers are
// not). weights_digest() covers parameters only; checkpoints and the
// stage's final "weights" (layered_model::state()) carry the buffers too.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/layered_model.hpp"
#include "model/core/non_finite.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/training.hpp"
#include "model/core/training_checkpoint.hpp"

namespace torch::nn {
class Conv2dImpl;
}

namespace baton::model {

/// Whether backward uses the weights of the forward (PipeDream) or the
/// current ones (recomputing the forward with them: what happens without
/// stashing, kept so that tests can show the difference).
enum class stash_mode { stash, none };

/// What a backward did.
struct backward_result {
  at::Tensor input_gradient;     ///< dL/d(input); undefined for the first stage
  int64_t forward_version = -1;  ///< weight version the forward used
  int64_t backward_version = -1; ///< weight version the backward used
  double loss = 0;               ///< mean loss (last stage only)
  /// With take_weight_gradient: the previous stage's last layer's input,
  /// for previous_weight_gradients().
  at::Tensor previous_input;
};

/// What crosses a boundary beside the activations when the next stage
/// computes the weight gradient of this stage's last layer.
struct boundary_io {
  at::Tensor previous_input; ///< in (take_weight_gradient): the previous stage's last layer's input
  at::Tensor last_input;     ///< out (hand_on_weight_gradient): this stage's last layer's input
};

/// The convolution `layer` holds when the next stage can compute its weight
/// gradient (a torch::nn::Conv2d padding with zeros of given sizes), else
/// nullptr with the reason in `why`.
std::shared_ptr<torch::nn::Conv2dImpl> boundary_convolution(const named_layer& layer,
                                                            std::string* why = nullptr);

/// The weight half of `conv`'s backward: its weight's gradient, then its
/// bias's when it has one, from its input and the gradient of its output,
/// as autograd's ConvolutionBackward0 computes them (the kernel ATen picks
/// for these tensors and options; the weight's values are not read).
std::vector<at::Tensor> convolution_weight_gradients(const torch::nn::Conv2dImpl& conv,
                                                     const at::Tensor& input,
                                                     const at::Tensor& output_gradient);

/// A trainable stage: a slice of layers, its optimizer state and its weight
/// versions. Not thread-safe: one actor owns it.
class stage_trainer {
public:
  stage_trainer(layered_model layers, optimizer_spec optimizer, stash_mode mode);

  /// Forward of microbatch `id` with the current weights, or with the held
  /// version `version` (vertical sync: the version the input stage chose).
  /// `first_stage`: the input needs no gradient. Returns the output,
  /// detached (to send). In training mode: batch norm normalises with the
  /// microbatch's statistics and updates its running statistics (buffers).
  /// Precondition: `id` is not in flight. `boundary`: required when the
  /// stage hands on or takes a boundary's weight gradient (throws
  /// model::error without it, or without a previous input of the
  /// microbatch's rows).
  at::Tensor forward(int64_t id, const at::Tensor& input, bool first_stage,
                     int64_t version = -1, boundary_io* boundary = nullptr);

  /// The next stage computes the weight gradient of this stage's last layer
  /// (a torch::nn::Conv2d with zero padding whose parameters no other layer
  /// holds; throws model::error otherwise): its parameters get their
  /// gradients from add_last_weight_gradients(), one call per backward.
  void hand_on_weight_gradient();
  /// This stage computes the weight gradient of `previous`, the previous
  /// stage's last layer as built from the same model (only its shape and
  /// options are read), from its input in boundary_io and this stage's
  /// input gradient; same requirements as hand_on_weight_gradient.
  void take_weight_gradient(const named_layer& previous);

  /// Vertical sync: no later forward will ask for a version older than `v`;
  /// versions from `v` on are kept even when no microbatch uses them yet.
  void retain_from(int64_t v);

  /// Whether version `v` is held (the current one or a kept older one).
  bool holds(int64_t v) const { return versions_.count(v) != 0; }

  /// Forward without autograd state, with the current weights (evaluation),
  /// in evaluation mode: batch norm uses its running statistics and leaves
  /// them unchanged. Not const: the layers are switched to evaluation mode
  /// for the call and back to training mode after it (also on an exception).
  at::Tensor infer(const at::Tensor& input);

  /// Backward of microbatch `id` given dL/d(output). Gradients accumulate
  /// into the parameters until step(). Precondition: forward(id) ran.
  backward_result backward(int64_t id, const at::Tensor& output_gradient);

  /// With take_weight_gradient: the weight half of the previous stage's
  /// last layer's backward for `r` (weight, then bias when it has one), to
  /// send back. Apart from backward() so that the input gradient can go
  /// first: the previous stage's own backward needs only that.
  std::vector<at::Tensor> previous_weight_gradients(const backward_result& r) const;

  /// With hand_on_weight_gradient: the last layer's weight gradients of one
  /// backward as the next stage computed them, added as autograd's
  /// AccumulateGrad would, in the order of the backwards. step() and
  /// take_gradients() throw model::error while a backward's are missing;
  /// so does this when they do not fit the parameters or no backward
  /// waits for them (then nothing changes).
  void add_last_weight_gradients(const std::vector<at::Tensor>& gradients);

  /// Last stage: cross entropy of the output of `id` against `labels`,
  /// scaled by 1/`scale` (microbatches per minibatch), then backward.
  backward_result backward_loss(int64_t id, const at::Tensor& labels, int32_t scale);

  /// The run's length, for the optimizer's schedule (lr_at); without it
  /// (0) a stage steps at optimizer.lr and refuses another schedule.
  void set_schedule(int64_t steps_per_epoch, int64_t epochs) {
    steps_per_epoch_ = steps_per_epoch;
    epochs_ = epochs;
  }

  /// One optimizer step over the accumulated gradients (then cleared):
  /// version + 1.
  void step();

  /// The accumulated gradients (zeros for parameters that got none), taken:
  /// the accumulators are cleared. A replica's contribution to its group.
  std::vector<at::Tensor> take_gradients();

  /// One optimizer step with `gradients` (one per parameter, in parameters'
  /// order) instead of the accumulated ones: version + 1. The accumulated
  /// gradients stay: a replica group's step may come while a later
  /// backward's are in them, waiting for its weight half.
  void step(const std::vector<at::Tensor>& gradients);

  /// Current weights, buffers, optimizer state (momentum.<name>, and
  /// second.<name> for adam and adamw) and version, for a checkpoint.
  /// Precondition: nothing in flight (a flush schedule between minibatches).
  training_state save_state() const;
  /// Continues from `s` (the versions held become just s.version); throws
  /// model::error naming the tensor when `s` does not fit this stage, and
  /// then changes nothing. Precondition: nothing in flight.
  void restore(const training_state& s);

  /// The current weight version (0 before any step).
  int64_t version() const { return version_; }
  /// Microbatches that ran forward and not yet backward.
  size_t in_flight() const { return stash_.size(); }
  /// Weight versions held: the current one plus every older one that an
  /// in-flight microbatch still needs.
  size_t versions_held() const { return versions_.size(); }

  const layered_model& layers() const { return layers_; }

private:
  struct stashed {
    at::Tensor input;   ///< the input as received (for recomputation)
    at::Tensor leaf;    ///< the input leaf of the graph (needs grad unless first stage)
    at::Tensor output;  ///< the graph's output
    at::Tensor previous_input; ///< take_weight_gradient: the previous layer's input
    int64_t version = 0;
    bool first_stage = false;
  };
  struct version_entry {
    std::vector<at::Tensor> parameters; ///< parameter data of this version
    int32_t users = 0;                  ///< in-flight microbatches that used it
  };

  backward_result run_backward(int64_t id, const at::Tensor* output_gradient,
                               const at::Tensor* labels, int32_t scale);
  at::Tensor run_forward(const at::Tensor& leaf, boundary_io* boundary);
  void check_no_weight_gradient_missing(const char* what) const;
  void use_parameters(const std::vector<at::Tensor>& data);
  void release(int64_t version);
  void drop_unused(int64_t version);

  layered_model layers_;
  std::vector<at::Tensor> parameters_; ///< the parameter variables (leaves)
  std::vector<parameter_state> state_; ///< per parameter; steps == version_
  /// Per parameter: kept out of training by its TorchScript file
  /// (requires_grad False when saved); a step leaves it as it is.
  std::vector<bool> frozen_;
  optimizer_spec optimizer_;
  int64_t steps_per_epoch_ = 0;
  int64_t epochs_ = 0;
  stash_mode mode_;
  int64_t version_ = 0;
  int64_t retain_from_ = INT64_MAX; ///< vertical sync: keep versions >= this
  std::map<int64_t, stashed> stash_;
  std::map<int64_t, version_entry> versions_;
  non_finite_watch watch_{"the last pipeline stage"}; ///< names where a NaN loss came from
  /// hand_on_weight_gradient: the layers before the last, the last, and the
  /// last one's parameters (indices into parameters_).
  std::optional<std::pair<layered_model, layered_model>> handing_on_;
  std::vector<size_t> last_parameters_;
  /// Backwards whose last weight gradients add_last_weight_gradients has
  /// not had yet.
  int64_t weight_gradients_missing_ = 0;
  /// take_weight_gradient: the previous stage's last layer.
  std::shared_ptr<torch::nn::Conv2dImpl> taking_;
};

} // namespace baton::model

#pragma once

// The arithmetic of a trainable pipeline stage (PipeDream), free of actors:
// forward keeps what backward needs (the stash) keyed by microbatch id,
// backward produces the gradient for the previous stage, a step makes a new
// weight version. Actors only decide the order (the schedule).
//
// Weight stashing: the optimiser updates out of place, so every step makes
// new parameter tensors (version v+1) while the tensors of version v live on
// as long as a microbatch that ran forward with v has not gone backward. At
// backward, the stage swaps in the parameters of the microbatch's forward
// version, runs autograd, and swaps the current version back: the backward of
// m uses exactly the weights its forward used.

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/layered_model.hpp"
#include "model/training.hpp"

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
};

/// A trainable stage: a slice of layers, its SGD state and its weight
/// versions. Not thread-safe: one actor owns it.
class stage_trainer {
public:
  stage_trainer(layered_model layers, optimizer_spec optimizer, stash_mode mode);

  /// Forward of microbatch `id` with the current weights. `first_stage`:
  /// the input needs no gradient. Returns the output, detached (to send).
  /// Precondition: `id` is not in flight.
  at::Tensor forward(int64_t id, const at::Tensor& input, bool first_stage);

  /// Forward without autograd state, with the current weights (evaluation).
  at::Tensor infer(const at::Tensor& input) const;

  /// Backward of microbatch `id` given dL/d(output). Gradients accumulate
  /// into the parameters until step(). Precondition: forward(id) ran.
  backward_result backward(int64_t id, const at::Tensor& output_gradient);

  /// Last stage: cross entropy of the output of `id` against `labels`,
  /// scaled by 1/`scale` (microbatches per minibatch), then backward.
  backward_result backward_loss(int64_t id, const at::Tensor& labels, int32_t scale);

  /// One SGD step over the accumulated gradients (then zeroed): version + 1.
  void step();

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
    int64_t version = 0;
    bool first_stage = false;
  };
  struct version_entry {
    std::vector<at::Tensor> parameters; ///< parameter data of this version
    int32_t users = 0;                  ///< in-flight microbatches that used it
  };

  backward_result run_backward(int64_t id, const at::Tensor* output_gradient,
                               const at::Tensor* labels, int32_t scale);
  void use_parameters(const std::vector<at::Tensor>& data);
  void release(int64_t version);

  layered_model layers_;
  std::vector<at::Tensor> parameters_; ///< the parameter variables (leaves)
  std::vector<at::Tensor> momentum_;
  optimizer_spec optimizer_;
  stash_mode mode_;
  int64_t version_ = 0;
  std::map<int64_t, stashed> stash_;
  std::map<int64_t, version_entry> versions_;
};

} // namespace baton::model

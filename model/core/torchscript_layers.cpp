#include <filesystem>

#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"

namespace baton::model {

namespace {

// -- a TorchScript child as a layer ------------------------------------------

/// One top-level child of a TorchScript model, run through the interpreter.
/// Its parameters are registered again (same tensors, not copies) under a
/// mirror of the child's module tree, so that named_parameters(), checkpoints
/// and optimisers see and update exactly the tensors the interpreter uses.
class ScriptLayerImpl : public torch::nn::Module {
public:
  explicit ScriptLayerImpl(torch::jit::Module module) : module_(std::move(module)) {
    mirror(*this, module_);
  }

  torch::Tensor forward(torch::Tensor x) { return module_.forward({std::move(x)}).toTensor(); }

  void train(bool on = true) override {
    module_.train(on);
    torch::nn::Module::train(on);
  }

private:
  static void mirror(torch::nn::Module& target, const torch::jit::Module& source) {
    for (const auto& p : source.named_parameters(/*recurse=*/false))
      target.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& child : source.named_children()) {
      auto sub = std::make_shared<torch::nn::Module>();
      mirror(*sub, child.value);
      target.register_module(child.name, sub);
    }
  }

  torch::jit::Module module_;
};
TORCH_MODULE(ScriptLayer);

} // namespace

std::vector<named_layer> torchscript_layers(const model_spec& spec) {
  if (spec.path.empty() || !std::filesystem::is_regular_file(spec.path))
    throw file_error("model 'torchscript': file '" + spec.path +
                     "' not found (expected a TorchScript archive from torch.jit.save)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(spec.path);
  } catch (const c10::Error& e) {
    throw file_error(spec.path + ": not a readable TorchScript archive (" +
                     e.what_without_backtrace() + ")");
  }
  std::vector<named_layer> layers;
  for (const auto& child : module.named_children())
    layers.push_back({child.name, torch::nn::AnyModule(ScriptLayer(child.value))});
  if (layers.empty())
    throw file_error(spec.path + ": the TorchScript model has no child modules, expected its "
                                 "layers as top-level children");
  return layers;
}

} // namespace baton::model

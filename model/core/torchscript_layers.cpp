#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"
#include "model/core/random.hpp"

namespace baton::model {

namespace {

// -- what a child's forward does -----------------------------------------------

/// What a child's forward does that its layer must know: draw random
/// numbers in training (dropout, RReLU, a `rand_like` of its own) and
/// change a tensor in place (`ReLU(inplace=True)`: `aten::relu_`), which
/// autograd refuses on a stage's input. Read from its graph with every call
/// inlined; a graph that cannot be read counts as doing both.
struct forward_traits {
  bool draws_random_numbers = true;
  bool works_in_place = true;
};

forward_traits traits_of(const torch::jit::Module& m) {
  static const std::set<std::string> random_operators{
    "aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
    "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
    "aten::feature_alpha_dropout_", "aten::native_dropout", "aten::bernoulli",
    "aten::bernoulli_", "aten::rand", "aten::rand_like", "aten::randn", "aten::randn_like",
    "aten::randint", "aten::randint_like", "aten::randperm", "aten::normal", "aten::normal_",
    "aten::uniform_", "aten::multinomial", "aten::poisson", "aten::binomial", "aten::rrelu",
    "aten::rrelu_", "aten::rrelu_with_noise", "aten::rrelu_with_noise_", "aten::exponential_",
    "aten::geometric_", "aten::cauchy_", "aten::log_normal_", "aten::random_"};
  std::shared_ptr<torch::jit::Graph> graph;
  try {
    graph = m.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
  } catch (const std::exception&) {
    return {};
  }
  forward_traits traits{false, false};
  std::function<void(const torch::jit::Block*)> read = [&](const torch::jit::Block* block) {
    for (const auto* node : block->nodes()) {
      const std::string kind = node->kind().toQualString();
      traits.draws_random_numbers |= random_operators.count(kind) != 0;
      // aten::relu_, aten::add_; not a name such as aten::__and__.
      traits.works_in_place |= kind.rfind("aten::", 0) == 0 && kind.size() > 7 &&
                               kind.back() == '_' && kind[kind.size() - 2] != '_';
      for (const auto* inner : node->blocks())
        read(inner);
    }
  };
  read(graph->block());
  return traits;
}

/// A digest of `x`: its type, shape and up to 4,096 of its 8-byte words,
/// evenly spaced. The same tensor gives the same digest in every process.
/// Read detached: a copy made contiguous is no part of the autograd graph.
uint64_t sampled_digest(const at::Tensor& x) {
  const at::Tensor c = x.detach().contiguous();
  uint64_t h = mix64(static_cast<uint64_t>(c.scalar_type()));
  for (const auto size : c.sizes())
    h = mix64(h ^ static_cast<uint64_t>(size));
  const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
  const size_t words = static_cast<size_t>(c.numel()) * c.element_size() / 8;
  const size_t stride = std::max<size_t>(1, words / 4096);
  for (size_t i = 0; i < words; i += stride) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + 8 * i, sizeof word);
    h = mix64(h ^ word);
  }
  return h;
}

/// Held while a layer seeds PyTorch's default generator and draws from it:
/// the generator is one per process, and the stages, workers and heads of
/// a process compute on threads of their own.
std::mutex& default_generator_holder() {
  static std::mutex holder;
  return holder;
}

// -- a TorchScript child as a layer ------------------------------------------

/// One top-level child of a TorchScript model, run through the interpreter.
/// Its parameters and buffers are registered again (same tensors, not
/// copies) under a mirror of the child's module tree, so that
/// named_parameters(), named_buffers(), checkpoints and optimisers see and
/// update exactly the tensors the interpreter uses (batch norm updates its
/// running statistics in place).
///
/// A child that draws random numbers in training (dropout) draws them from
/// PyTorch's default generator seeded for the call with the model's seed,
/// the layer's position and a digest of its input: the same microbatch at
/// the same layer gets the same mask in every layout (stages, workers,
/// node processes, `--mode local`), in every run and when a microbatch is
/// trained again after a restart (DESIGN invariants 1, 2, 7, 8 and 10).
/// Such calls are serialised in a process; other layers are not. A child
/// that works in place (`ReLU(inplace=True)`) first in a stage computes on
/// a copy of the stage's input, which autograd would not let it change.
class ScriptLayerImpl : public torch::nn::Module {
public:
  ScriptLayerImpl(torch::jit::Module module, uint64_t random_key)
    : module_(std::move(module)), random_key_(random_key), traits_(traits_of(module_)) {
    mirror(*this, module_);
    for (const auto& p : module_.named_parameters(/*recurse=*/true))
      if (!p.value.requires_grad())
        frozen_.push_back(p.value);
  }

  /// The parameters the file keeps out of training (requires_grad False).
  const std::vector<at::Tensor>& frozen() const { return frozen_; }

  torch::Tensor forward(torch::Tensor x) {
    // A stage's input is a leaf that takes its gradient; a child that works
    // in place gets a copy (the same values; the gradient passes through).
    if (traits_.works_in_place && x.is_leaf() && x.requires_grad())
      x = x.clone();
    if (!traits_.draws_random_numbers || !module_.is_training())
      return module_.forward({std::move(x)}).toTensor();
    const uint64_t seed = mix64(random_key_ ^ sampled_digest(x));
    std::lock_guard<std::mutex> hold(default_generator_holder());
    auto generator = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_current_seed(seed);
    }
    return module_.forward({std::move(x)}).toTensor();
  }

  void train(bool on = true) override {
    module_.train(on);
    torch::nn::Module::train(on);
  }

private:
  static void mirror(torch::nn::Module& target, const torch::jit::Module& source) {
    for (const auto& p : source.named_parameters(/*recurse=*/false))
      target.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : source.named_buffers(/*recurse=*/false))
      target.register_buffer(b.name, b.value);
    for (const auto& child : source.named_children()) {
      auto sub = std::make_shared<torch::nn::Module>();
      mirror(*sub, child.value);
      target.register_module(child.name, sub);
    }
  }

  torch::jit::Module module_;
  uint64_t random_key_;
  forward_traits traits_;
  std::vector<at::Tensor> frozen_;
};
TORCH_MODULE(ScriptLayer);

// -- checking the module's form ---------------------------------------------------

const char* expected_form =
  "baton trains a module whose top-level children are its layers, each taking the previous "
  "one's output, the first the data's samples [N, C, H, W] (a torch.nn.Sequential, or a "
  "module whose forward calls each child once, in the order they are defined; see "
  "docs/models.md)";

/// "Conv2d" for "__torch__.torch.nn.modules.conv.Conv2d".
std::string type_name(const torch::jit::Module& m) {
  return m.type()->name() ? m.type()->name()->name() : "module";
}

/// "Sequential with children 0 (Conv2d), 1 (ReLU)": what the file holds.
std::string structure(const torch::jit::Module& m) {
  std::ostringstream out;
  out << type_name(m);
  const char* separator = " with children ";
  size_t children = 0;
  for (const auto& child : m.named_children()) {
    out << separator << "'" << child.name << "' (" << type_name(child.value) << ")";
    separator = ", ";
    ++children;
  }
  if (children == 0)
    out << " with no child modules";
  return out.str();
}

std::string shape_of(const at::Tensor& x) {
  std::ostringstream out;
  out << x.sizes();
  return out.str();
}

/// "all NaN", "all inf" or "NaN and inf": what `t` (none of it finite) holds.
std::string non_finite_kind(const at::Tensor& t) {
  const bool nan = torch::isnan(t).any().item<bool>(), inf = torch::isinf(t).any().item<bool>();
  return nan && inf ? "NaN and inf" : nan ? "all NaN" : "all inf";
}

/// Runs `m` on `x`; a failure is reported as `what` fails, with the reason.
at::Tensor run(torch::jit::Module& m, const at::Tensor& x, const std::string& path,
               const std::string& what, const torch::jit::Module& whole) {
  c10::IValue y;
  try {
    y = m.forward({x});
  } catch (const std::exception& e) {
    throw file_error(path + ": " + what + " fails on an input of shape " + shape_of(x) + " (" +
                     error_reason(e) + "); the module is " + structure(whole) + ", and " +
                     expected_form);
  }
  if (!y.isTensor())
    throw file_error(path + ": " + what + " returns a " + y.tagKind() +
                     ", not a tensor; the module is " + structure(whole) + ", and " +
                     expected_form);
  return y.toTensor();
}

/// The module's own forward and its children run in order must agree on a
/// probe of the data's shape: what make_model's layers compute is then
/// what the user's module computes.
void check_form(torch::jit::Module& module, const model_spec& spec) {
  const at::Tensor probe = probe_input(spec);
  const bool training = module.is_training();
  module.eval(); // dropout off, batch norm's running statistics left alone
  torch::NoGradGuard no_grad;
  const std::string data = "its forward, on a probe shaped as the data's samples,";
  const at::Tensor whole = run(module, probe, spec.path, data, module);
  at::Tensor x = probe;
  std::string previous = "the data's samples", first_not_finite;
  for (auto child : module.named_children()) {
    x = run(child.value, x,
            spec.path, "child '" + child.name + "' (" + type_name(child.value) + "), given " +
                         previous + ",",
            module);
    previous = "the output of child '" + child.name + "'";
    if (first_not_finite.empty() && !torch::isfinite(x).all().item<bool>())
      first_not_finite = "child '" + child.name + "' (" + type_name(child.value) + ")";
  }
  module.train(training);
  // A model whose output is never finite cannot train: that is the reason,
  // not its form (NaN compares unequal to itself, so the check below would
  // call it "not its children in order"; issue 32 item 13).
  if (!torch::isfinite(whole).any().item<bool>())
    throw file_error(spec.path + ": its forward returns no finite value on a probe of shape " +
                     shape_of(probe) + " (" + non_finite_kind(whole) + ")" +
                     (first_not_finite.empty()
                        ? std::string{}
                        : "; " + first_not_finite + " is the first child whose output is not "
                                                    "finite, given finite inputs") +
                     ": a model whose output is NaN or inf cannot be trained; the module is " +
                     structure(module));
  // Where both are NaN or inf at the same places, the form is the same.
  if (!whole.sizes().equals(x.sizes()) || !torch::allclose(whole, x, 1e-4, 1e-5, true))
    throw file_error(spec.path + ": its forward does not compute its children in order (on a "
                     "probe of shape " + shape_of(probe) + " it returns " + shape_of(whole) +
                     ", its children run in order " + shape_of(x) +
                     (whole.sizes().equals(x.sizes()) ? ", with other values" : "") +
                     "); the module is " + structure(module) + ", and " + expected_form);
}

torch::jit::Module load(const model_spec& spec) {
  if (spec.path.empty() || !std::filesystem::is_regular_file(spec.path))
    throw file_error("model 'torchscript': file '" + spec.path +
                     "' not found (expected a TorchScript archive from torch.jit.save)");
  try {
    return torch::jit::load(spec.path);
  } catch (const c10::Error& e) {
    throw file_error(spec.path + ": not a readable TorchScript archive (" +
                     e.what_without_backtrace() + ")");
  }
}

/// The module at `path` ("b", "block.0") under `root`.
torch::jit::Module submodule(const torch::jit::Module& root, const std::string& path) {
  torch::jit::Module m = root;
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '.');)
    m = m.attr(part).toModule();
  return m;
}

/// Makes every parameter that two children share (tied weights: they share
/// its storage) one tensor in both, the first child's, so that an update
/// through either side, in place or by set_data, is seen by both; throws
/// file_error when two share storage as different views (offsets, shapes),
/// which baton cannot keep as one parameter.
void unify_ties(torch::jit::Module& module, const std::string& path) {
  struct first_holder {
    std::string name;
    at::Tensor tensor;
  };
  std::map<const void*, first_holder> seen;
  for (const auto& child : module.named_children())
    for (const auto& p : child.value.named_parameters(/*recurse=*/true)) {
      const std::string name = child.name + "." + p.name;
      if (!p.value.defined())
        continue;
      const void* storage = p.value.storage().unsafeGetStorageImpl();
      auto [it, fresh] = seen.emplace(storage, first_holder{name, p.value});
      if (fresh || it->second.tensor.unsafeGetTensorImpl() == p.value.unsafeGetTensorImpl())
        continue;
      const at::Tensor& first = it->second.tensor;
      if (first.storage_offset() != p.value.storage_offset() ||
          !first.sizes().equals(p.value.sizes()) || !first.strides().equals(p.value.strides()) ||
          first.scalar_type() != p.value.scalar_type())
        throw file_error(path + ": parameter '" + name + "' shares the storage of '" +
                         it->second.name + "' as another view of it (another offset, shape or "
                         "type); baton trains a tensor shared by layers only when they share "
                         "the whole tensor (tied weights: `self.d.weight = self.b.weight`)");
      const auto dot = name.rfind('.');
      submodule(module, name.substr(0, dot)).setattr(name.substr(dot + 1), first);
    }
}

} // namespace

std::string error_reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::istringstream lines(c10_error ? c10_error->what_without_backtrace() : e.what());
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t") != std::string::npos)
      last = line.substr(line.find_first_not_of(" \t"));
  return last;
}

std::vector<at::Tensor> parameters_frozen_by_file(const torch::nn::Module& layer) {
  const auto* script = dynamic_cast<const ScriptLayerImpl*>(&layer);
  return script != nullptr ? script->frozen() : std::vector<at::Tensor>{};
}

std::vector<named_layer> torchscript_layers(const model_spec& spec) {
  torch::jit::Module module = load(spec);
  if (module.named_children().size() == 0)
    throw file_error(spec.path + ": the module is " + structure(module) + ", but " +
                     expected_form);
  unify_ties(module, spec.path);
  check_form(module, spec);
  std::vector<named_layer> layers;
  for (const auto& child : module.named_children()) {
    const uint64_t random_key = mix64(spec.seed ^ mix64(layers.size()));
    layers.push_back({child.name, torch::nn::AnyModule(ScriptLayer(child.value, random_key))});
  }
  return layers;
}

} // namespace baton::model

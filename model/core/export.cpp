#include "model/core/export.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"

// Each layer becomes a module of its own class ("__torch__.baton.Conv2d",
// mangled when a class of that name exists) in one compilation unit, its
// forward compiled from the source written here. Children are called through
// getattr(self, "name").forward(...), which takes any name ("0", "layer1_0"):
// getattr gives a plain object, not a module, so calling it directly fails.

namespace baton::model {

namespace {

using torch::jit::Module;
using module_ptr = std::shared_ptr<torch::nn::Module>;

/// `s` as a TorchScript string literal. A name is also a submodule's
/// attribute, which the archive writes unescaped: quotes, backslashes and
/// control characters would make it unreadable, so they are refused.
std::string literal(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == '\\' || c == '"')
      throw error("cannot export the name '" + s +
                  "': it holds a quote, a backslash or a control character");
  return "\"" + s + "\"";
}

/// A list of ints in TorchScript: "[1, 1]".
std::string ints(c10::ArrayRef<int64_t> values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

/// A double that TorchScript reads back bit for bit.
std::string real(double x) {
  auto text = fmt::format("{:.17g}", x);
  return text.find_first_of(".en") == std::string::npos ? text + ".0" : text;
}

/// The attribute expression of the tensor `name` of `m`, or "None".
std::string optional_tensor(const torch::nn::Module& m, const std::string& name) {
  const auto params = m.named_parameters(/*recurse=*/false);
  const auto buffers = m.named_buffers(/*recurse=*/false);
  const bool held = (params.find(name) && params[name].defined()) ||
                    (buffers.find(name) && buffers[name].defined());
  return held ? "self." + name : "None";
}

/// The TorchScript call of the child `name` of `owner` on `arg`.
std::string call(const std::string& owner, const std::string& name, const std::string& arg) {
  return "getattr(" + owner + ", " + literal(name) + ").forward(" + arg + ")";
}

/// A call of every child in `order` on x, then `tail` (a return).
std::string chain(const std::vector<std::string>& order, const std::string& tail) {
  std::string body;
  for (const auto& name : order)
    body += "    x = " + call("self", name, "x") + "\n";
  return body + tail;
}

std::string forward_of(const std::string& body) {
  return "def forward(self, x: Tensor) -> Tensor:\n" + body;
}

/// The values `v` in TorchScript: one number, or a float32 tensor [1, C, 1, 1].
std::string per_channel(const std::vector<double>& v) {
  if (v.size() == 1)
    return real(v[0]);
  std::vector<std::string> texts;
  for (double x : v)
    texts.push_back(real(x));
  return fmt::format("torch.tensor([{}]).view(1, {}, 1, 1)", fmt::join(texts, ", "), v.size());
}

/// The methods of a module that carries the data's normalisation, around
/// `body` (its forward's body after the normalisation, returning `result`):
/// normalise (raw samples as the loader normalises them, the same float32
/// operations in the same order), forward (uint8 samples normalised first,
/// anything else taken as normalised already) and forward_raw (every input
/// normalised). Without `n`, forward alone.
std::string input_methods(const std::optional<input_normalisation>& n, const std::string& result,
                          const std::string& body) {
  const std::string forward = "def forward(self, x: Tensor) -> " + result + ":\n";
  if (!n)
    return forward + body;
  if (n->mean.empty() || n->mean.size() != n->std.size())
    throw error("cannot export the data's normalisation: " + std::to_string(n->mean.size()) +
                " means and " + std::to_string(n->std.size()) + " stds");
  // The data files hold uint8 or float32 samples: "not floating point" is
  // uint8 (a dtype constant cannot be named in a C++-defined method).
  return "def normalise(self, x: Tensor) -> Tensor:\n"
         "    if not x.is_floating_point():\n"
         "        x = x.float() / 255.0\n"
         "    else:\n"
         "        x = x.float()\n"
         "    return (x - " + per_channel(n->mean) + ") / " + per_channel(n->std) + "\n"
         "\n" + forward +
         "    if not x.is_floating_point():\n"
         "        x = self.normalise(x)\n" + body +
         "\n"
         "def forward_raw(self, x: Tensor) -> " + result + ":\n"
         "    return self.forward(self.normalise(x))\n";
}

/// Writes the modules of one export, in one compilation unit (a class name
/// is unique in it: mangled otherwise).
class exporter {
public:
  /// The layers of `m` as submodules of a new module with their forward in order.
  Module sequence(const layered_model& m, const export_options& options) {
    options_ = &options;
    script_.reset();
    auto out = new_module("Model");
    std::vector<std::string> order;
    for (const auto& layer : m.layers()) {
      out.register_module(layer.name, layer_module(m, layer));
      order.push_back(layer.name);
    }
    out.define(input_methods(options.input, "Tensor", chain(order, "    return x\n")));
    return out;
  }

  Module new_module(const std::string& kind) {
    Module m("__torch__.baton." + kind, unit_, /*shouldMangle=*/true);
    m.register_attribute("training", c10::BoolType::get(), false);
    return m;
  }

private:
  Module layer_module(const layered_model& m, const named_layer& layer) {
    const auto& source = layer.module.ptr();
    if (ends_with(source->name(), "ScriptLayerImpl"))
      return script_child(m, layer.name);
    if (ends_with(source->name(), "BasicBlockImpl"))
      return basic_block(*source, layer.name);
    return convert(*source, layer.name);
  }

  /// `source`, a LibTorch module, with copies of its own tensors.
  Module convert(const torch::nn::Module& source, const std::string& where) {
    if (auto seq = dynamic_cast<const torch::nn::SequentialImpl*>(&source))
      return sequential(*seq, where);
    auto body = leaf_forward(source);
    if (!body)
      throw error("cannot export layer '" + where + "': a " + source.name() +
                  " (exported: Conv2d, Linear, ReLU, MaxPool2d, AdaptiveAvgPool2d, Flatten, "
                  "Dropout, BatchNorm1d/2d, Sequential, resnet18's BasicBlock, TorchScript "
                  "layers)");
    auto out = new_module(kind_of(source));
    copy_tensors(source, out);
    out.define(forward_of(*body));
    return out;
  }

  Module sequential(const torch::nn::SequentialImpl& seq, const std::string& where) {
    auto out = new_module("Sequential");
    std::vector<std::string> order;
    for (const auto& child : seq.named_children()) {
      out.register_module(child.key(), convert(*child.value(), where + "." + child.key()));
      order.push_back(child.key());
    }
    out.define(forward_of(chain(order, "    return x\n")));
    return out;
  }

  /// torchvision's BasicBlock (model/core/builtin_models.cpp), its residual
  /// branch times options_.residual_scales[name].
  Module basic_block(const torch::nn::Module& block, const std::string& name) {
    auto out = new_module("BasicBlock");
    bool downsample = false;
    for (const auto& child : block.named_children()) {
      out.register_module(child.key(), convert(*child.value(), name + "." + child.key()));
      downsample = downsample || child.key() == "downsample";
    }
    const auto scale = options_->residual_scales.find(name);
    std::string body = "    identity = " + (downsample ? call("self", "downsample", "x") : "x") +
                       "\n    y = torch.relu(" + call("self", "bn1", call("self", "conv1", "x")) +
                       ")\n    y = " + call("self", "bn2", call("self", "conv2", "y")) + "\n";
    if (scale != options_->residual_scales.end() && scale->second != 1.0)
      body += "    y = y * " + real(scale->second) + "\n";
    out.define(forward_of(body + "    return torch.relu(y + identity)\n"));
    return out;
  }

  /// The child `name` of the TorchScript file the model was loaded from,
  /// with the layer's trained parameters.
  Module script_child(const layered_model& m, const std::string& name) {
    auto& file = script_file(name);
    auto child = file.attr(name).toModule(); // loaded for this export alone
    // The layer's own tensors, a tied one too (named_parameters lists it
    // under its first layer only). The children of the one loaded file
    // share tied tensors as the user's module did: the export keeps the tie.
    std::map<std::string, at::Tensor> trained;
    for (const auto& p : m.layers()[static_cast<size_t>(m.index_of(name))]
                           .module.ptr()
                           ->named_parameters(/*recurse=*/true))
      trained.emplace(p.key(), p.value());
    torch::NoGradGuard no_grad;
    for (const auto& p : child.named_parameters(/*recurse=*/true)) {
      auto it = trained.find(p.name);
      if (it == trained.end() || !it->second.sizes().equals(p.value.sizes()))
        throw error("cannot export layer '" + name + "': " + options_->script_path +
                    " has parameter '" + p.name + "' that the trained layer does not");
      p.value.copy_(it->second);
    }
    return child;
  }

  Module& script_file(const std::string& layer) {
    if (options_->script_path.empty())
      throw error("cannot export layer '" + layer +
                  "': a TorchScript layer, and the export names no TorchScript file");
    if (!script_) {
      if (!std::filesystem::is_regular_file(options_->script_path))
        throw file_error(options_->script_path + ": TorchScript model not found (the layers of '" +
                         layer + "' come from it)");
      try {
        script_ = torch::jit::load(options_->script_path);
      } catch (const c10::Error& e) {
        throw file_error(options_->script_path + ": not a readable TorchScript archive (" +
                         e.what_without_backtrace() + ")");
      }
    }
    if (!script_->hasattr(layer) || !script_->attr(layer).isModule())
      throw error("cannot export layer '" + layer + "': " + options_->script_path +
                  " has no child module of that name");
    return *script_;
  }

  static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  }

  /// "Conv2d" for torch::nn::Conv2dImpl.
  static std::string kind_of(const torch::nn::Module& m) {
    auto name = m.name();
    if (auto colon = name.rfind("::"); colon != std::string::npos)
      name = name.substr(colon + 2);
    if (ends_with(name, "Impl"))
      name.resize(name.size() - 4);
    return name;
  }

  /// Copies of the module's own parameters (trainable again in PyTorch) and
  /// buffers; a tensor that several layers share is copied once and the
  /// copy shared (a parameter is its storage).
  void copy_tensors(const torch::nn::Module& source, Module& out) {
    for (const auto& p : source.named_parameters(/*recurse=*/false))
      if (p.value().defined())
        out.register_parameter(p.key(), copy_of(p.value(), true), /*is_buffer=*/false);
    for (const auto& b : source.named_buffers(/*recurse=*/false))
      if (b.value().defined())
        out.register_buffer(b.key(), copy_of(b.value(), false));
  }

  at::Tensor copy_of(const at::Tensor& t, bool parameter) {
    auto [it, fresh] = copies_.emplace(t.unsafeGetTensorImpl(), at::Tensor());
    if (fresh) {
      it->second = t.detach().clone();
      if (parameter)
        it->second.set_requires_grad(true);
    }
    return it->second;
  }

  /// The body of the forward of a LibTorch layer, as its forward computes
  /// it in evaluation mode; nullopt for a kind not written here.
  static std::optional<std::string> leaf_forward(const torch::nn::Module& m) {
    using namespace torch::nn;
    if (auto conv = dynamic_cast<const Conv2dImpl*>(&m))
      return conv2d(*conv);
    if (dynamic_cast<const LinearImpl*>(&m))
      return "    return torch.linear(x, self.weight, " + optional_tensor(m, "bias") + ")\n";
    if (dynamic_cast<const ReLUImpl*>(&m))
      return std::string("    return torch.relu(x)\n");
    if (auto pool = dynamic_cast<const MaxPool2dImpl*>(&m)) {
      const auto& o = pool->options;
      return fmt::format("    return torch.max_pool2d(x, {}, {}, {}, {}, {})\n",
                         ints(*o.kernel_size()), ints(*o.stride()), ints(*o.padding()),
                         ints(*o.dilation()), o.ceil_mode() ? "True" : "False");
    }
    if (auto pool = dynamic_cast<const AdaptiveAvgPool2dImpl*>(&m))
      return adaptive_avg_pool2d(*pool);
    if (auto flatten = dynamic_cast<const FlattenImpl*>(&m))
      return fmt::format("    return torch.flatten(x, {}, {})\n", flatten->options.start_dim(),
                         flatten->options.end_dim());
    if (dynamic_cast<const DropoutImpl*>(&m))
      return std::string("    return x\n");
    if (auto bn = dynamic_cast<const BatchNorm1dImpl*>(&m))
      return batch_norm(m, bn->options);
    if (auto bn = dynamic_cast<const BatchNorm2dImpl*>(&m))
      return batch_norm(m, bn->options);
    return std::nullopt;
  }

  static std::optional<std::string> conv2d(const torch::nn::Conv2dImpl& conv) {
    const auto& o = conv.options;
    if (!c10::get_if<torch::enumtype::kZeros>(&o.padding_mode()))
      return std::nullopt;
    std::string padding;
    if (auto sizes = c10::get_if<torch::ExpandingArray<2>>(&o.padding()))
      padding = ints(**sizes);
    else
      padding = c10::get_if<torch::enumtype::kValid>(&o.padding()) ? "\"valid\"" : "\"same\"";
    return fmt::format("    return torch.conv2d(x, self.weight, {}, {}, {}, {}, {})\n",
                       optional_tensor(conv, "bias"), ints(*o.stride()), padding,
                       ints(*o.dilation()), o.groups());
  }

  static std::optional<std::string> adaptive_avg_pool2d(
    const torch::nn::AdaptiveAvgPool2dImpl& pool) {
    std::vector<int64_t> sizes;
    for (const auto& size : *pool.options.output_size()) {
      if (!size)
        return std::nullopt; // "keep the input's size": not written here
      sizes.push_back(*size);
    }
    return "    return torch.adaptive_avg_pool2d(x, " + ints(sizes) + ")\n";
  }

  /// LibTorch's BatchNorm forward in evaluation mode: the running statistics
  /// when it tracks them, else the batch's.
  static std::string batch_norm(const torch::nn::Module& m,
                                const torch::nn::BatchNormOptions& o) {
    const bool running = o.track_running_stats();
    return fmt::format(
      "    return torch.batch_norm(x, {}, {}, {}, {}, {}, {}, {}, True)\n",
      optional_tensor(m, "weight"), optional_tensor(m, "bias"),
      running ? optional_tensor(m, "running_mean") : "None",
      running ? optional_tensor(m, "running_var") : "None", running ? "False" : "True",
      real(o.momentum().value_or(0.0)), real(o.eps()));
  }

  const export_options* options_ = nullptr;
  std::map<const void*, at::Tensor> copies_; ///< source tensor -> its one copy
  std::shared_ptr<torch::jit::CompilationUnit> unit_ =
    std::make_shared<torch::jit::CompilationUnit>();
  std::optional<Module> script_;
};

} // namespace

torch::jit::Module script_module(const layered_model& m, const export_options& options) {
  try {
    return exporter().sequence(m, options);
  } catch (const c10::Error& e) {
    throw error(std::string("cannot export the model: ") + e.what_without_backtrace());
  }
}

torch::jit::Module script_module(const layered_model& backbone,
                                 const export_options& backbone_options,
                                 const std::vector<named_model>& heads) {
  try {
    exporter e;
    auto out = e.new_module("MultiHead");
    // The normalisation is the whole module's first step, not the backbone's.
    auto inner = backbone_options;
    inner.input.reset();
    out.register_module("backbone", e.sequence(backbone, inner));
    const export_options plain;
    auto all = e.new_module("Heads");
    std::string body = "    features = self.backbone.forward(x)\n"
                       "    out: Dict[str, Tensor] = {}\n";
    for (const auto& head : heads) {
      all.register_module(head.name, e.sequence(head.model, plain));
      body += "    out[" + literal(head.name) + "] = " + call("self.heads", head.name, "features") +
              "\n";
    }
    out.register_module("heads", all);
    out.define(input_methods(backbone_options.input, "Dict[str, Tensor]", body + "    return out\n"));
    return out;
  } catch (const c10::Error& e) {
    throw error(std::string("cannot export the model: ") + e.what_without_backtrace());
  }
}

void export_model(const layered_model& m, const std::string& path,
                  const export_options& options) {
  save_module(script_module(m, options), path);
}

} // namespace baton::model

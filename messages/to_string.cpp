// The one-line summaries of codec.hpp's to_string overloads: what CAF prints
// for a message (deep_to_string, logs). Tensors show dtype and shape, never
// their values, so that a summary stays one short line.

#include <sstream>

#include "messages/codec.hpp"
#include "messages/errc.hpp"

namespace baton::messages {

namespace {

/// Builds `name(field=value, ...)`; strings are quoted, tensors summarized.
class summary {
public:
  explicit summary(const char* name) {
    out_ << name << '(';
  }

  template <class T>
  summary& field(const char* name, const T& value) {
    separate();
    out_ << name << '=' << value;
    return *this;
  }

  summary& field(const char* name, const std::string& value) {
    separate();
    out_ << name << "=\"" << value << '"';
    return *this;
  }

  summary& field(const char* name, const at::Tensor& value) {
    separate();
    out_ << name << '=';
    if (!value.defined()) {
      out_ << "undefined";
      return *this;
    }
    out_ << c10::toString(value.scalar_type()) << '[';
    for (int64_t i = 0; i < value.dim(); ++i)
      out_ << (i > 0 ? ", " : "") << value.size(i);
    out_ << ']';
    return *this;
  }

  std::string str() {
    out_ << ')';
    return out_.str();
  }

private:
  void separate() {
    if (!first_)
      out_ << ", ";
    first_ = false;
  }

  std::ostringstream out_;
  bool first_ = true;
};

/// The summary of a struct whose `invalid` is set: its other members are
/// unspecified, so only the error is worth showing.
std::string invalid_text(const char* name, const caf::error& err) {
  return std::string{name} + "(invalid: " + describe(err) + ")";
}

const char* kind_name(control_kind x) {
  switch (x) {
    case control_kind::start:
      return "start";
    case control_kind::epoch_end:
      return "epoch_end";
    case control_kind::end_of_stream:
      return "end_of_stream";
    case control_kind::shutdown:
      return "shutdown";
  }
  return "unknown";
}

} // namespace

std::string to_string(const microbatch& x) {
  if (x.invalid)
    return invalid_text("microbatch", x.invalid);
  summary out{"microbatch"};
  out.field("id", x.id).field("step", x.step).field("epoch", x.epoch);
  auto index = std::to_string(x.index_in_step) + "/" + std::to_string(x.step_size);
  out.field("index", index.c_str());
  out.field("eval", x.eval ? x.validation ? "validation" : "true" : "false");
  out.field("version", x.weight_version);
  out.field("payload", x.payload);
  for (const auto& task : x.labels)
    out.field(("labels[" + task.task + "]").c_str(), task.values);
  if (!x.samples.empty())
    out.field("samples", static_cast<int64_t>(x.samples.size()));
  if (x.boundary_input.defined())
    out.field("boundary_input", x.boundary_input);
  return out.str();
}

std::string to_string(const gradient& x) {
  if (x.invalid)
    return invalid_text("gradient", x.invalid);
  summary out{"gradient"};
  out.field("microbatch", x.microbatch_id).field("step", x.step);
  out.field("version", x.weight_version).field("value", x.value);
  for (size_t i = 0; i < x.weight_gradients.size(); ++i)
    out.field(("weight_gradients[" + std::to_string(i) + "]").c_str(), x.weight_gradients[i]);
  return out.str();
}

std::string to_string(const tensor_set& x) {
  if (x.invalid)
    return invalid_text("tensor_set", x.invalid);
  summary out{"tensor_set"};
  out.field("kind", x.kind).field("from", x.from).field("replica", x.replica);
  out.field("step", x.step).field("step_size", x.step_size);
  // A set may hold every parameter of a model: count and size say enough.
  int64_t bytes = 0;
  for (const auto& tensor : x.tensors)
    if (tensor.defined())
      bytes += static_cast<int64_t>(tensor.nbytes());
  out.field("tensors", x.tensors.size()).field("bytes", bytes);
  return out.str();
}

std::string to_string(const credit& x) {
  if (x.invalid)
    return invalid_text("credit", x.invalid);
  summary out{"credit"};
  out.field("microbatch", x.microbatch_id).field("slots", x.slots);
  return out.str();
}

std::string to_string(const control& x) {
  if (x.invalid)
    return invalid_text("control", x.invalid);
  summary out{"control"};
  out.field("kind", kind_name(x.kind)).field("epoch", x.epoch).field("value", x.value);
  if (!x.text.empty())
    out.field("text", x.text);
  return out.str();
}

std::string to_string(const actor_report& x) {
  if (x.invalid)
    return invalid_text("actor_report", x.invalid);
  summary out{"actor_report"};
  out.field("actor", x.actor).field("role", x.role);
  if (!x.task.empty())
    out.field("task", x.task);
  out.field("node", x.node).field("busy_s", x.busy_seconds).field("idle_s", x.idle_seconds);
  out.field("bubble_s", x.bubble_seconds);
  if (x.process_cpu_seconds > 0)
    out.field("compute_cpu_s", x.compute_cpu_seconds)
      .field("process_cpu_s", x.process_cpu_seconds);
  out.field("samples", x.samples).field("train_loss", x.train_loss);
  out.field("test_accuracy", x.test_accuracy);
  out.field("edges", x.edges.size()).field("epochs", x.epochs.size());
  if (!x.trace.empty())
    out.field("trace_events", x.trace.size());
  if (!x.figures.empty())
    out.field("figures", x.figures.size());
  if (!x.events.empty())
    out.field("events", x.events.size());
  return out.str();
}

std::string to_string(const node_report& x) {
  if (x.invalid)
    return invalid_text("node_report", x.invalid);
  summary out{"node_report"};
  out.field("name", x.name).field("peak_rss_bytes", x.peak_rss_bytes);
  out.field("cpu_s", x.cpu_seconds).field("cores", x.cores);
  out.field("memory_bytes", x.memory_bytes);
  return out.str();
}

std::string to_string(const spawn_request& x) {
  if (x.invalid)
    return invalid_text("spawn_request", x.invalid);
  summary out{"spawn_request"};
  // The spec is YAML of any length: its size says enough in one line.
  out.field("role", x.role).field("name", x.name).field("spec_bytes", x.spec.size());
  return out.str();
}

std::string to_string(const progress& x) {
  if (x.invalid)
    return invalid_text("progress", x.invalid);
  summary out{"progress"};
  out.field("actor", x.actor).field("epoch", x.epoch).field("samples", x.samples);
  out.field("loss", x.loss);
  return out.str();
}

} // namespace baton::messages

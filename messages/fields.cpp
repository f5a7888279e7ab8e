#include "messages/fields.hpp"

#include <utility>
#include <vector>

#include "messages/errc.hpp"

namespace baton::messages::detail {

namespace {

// Lists on the wire. Cap'n Proto accepts a list of zero-sized structs (or of
// Void) of any length, charging each entry one word of the traversal limit
// only: with our limit of 4 words per message word (codec.cpp decode_words), a
// 64 MiB actor_report could claim 32 million empty edges and make us allocate
// 2.5 GB of edge_stats. But a sender has our schema (other schema versions are
// refused first), its encoder writes every entry of a List(T) with the full
// data and pointer sections of T, and the lists of one message never overlap:
// the lists of a message we wrote take at least sum(count * entry_words<T>)
// of its words. read_fields claims that many words (decoder::claim) before it
// builds a single C++ entry, and refuses a list that claims more than is left
// as malformed. The C++ entries are then about as large as the message
// (edge_stats: 80 bytes per 32 on the wire; task_labels: 40 per 16), and the
// bytes of their strings are bounded by capnp's traversal limit.

/// Words per entry of a List(T) as this build writes it (capnp's own
/// structSize<T>, which MessageBuilder uses for every list it initializes).
template <class T>
constexpr uint64_t entry_words() {
  constexpr uint64_t words = T::_capnpPrivate::dataWordSize + T::_capnpPrivate::pointerCount;
  static_assert(words > 0, "a list of empty structs has no size to bound it by");
  return words;
}

/// Claims the words of list `xs` of struct type T (see above).
template <class T>
caf::error claim(decoder& d, typename capnp::List<T>::Reader xs, const char* what) {
  return d.claim(xs.size(), entry_words<T>(), what);
}

/// "gradients[3]": how errors name entry `index` of a tensor set.
std::string entry_name(const std::string& kind, size_t index) {
  return (kind.empty() ? std::string{"tensors"} : kind) + "[" + std::to_string(index) + "]";
}

// Lists of an actor report.

void write_edges(wire::ActorReport::Builder b, const std::vector<edge_stats>& xs) {
  auto edges = b.initEdges(static_cast<unsigned>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    auto out = edges[static_cast<unsigned>(i)];
    out.setFrom(text_of(xs[i].from));
    out.setTo(text_of(xs[i].to));
    out.setMessages(xs[i].messages);
    out.setBytes(xs[i].bytes);
  }
}

void write_epochs(wire::ActorReport::Builder b, const std::vector<epoch_result>& xs) {
  auto epochs = b.initEpochs(static_cast<unsigned>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    auto out = epochs[static_cast<unsigned>(i)];
    out.setEpoch(xs[i].epoch);
    out.setTrainLoss(xs[i].train_loss);
    out.setTestAccuracy(xs[i].test_accuracy);
    out.setSamples(xs[i].samples);
    out.setValidationAccuracy(xs[i].validation_accuracy);
    out.setEvaluated(xs[i].evaluated);
    out.setValidated(xs[i].validated);
  }
}

void write_figures(wire::ActorReport::Builder b, const actor_report& x) {
  auto figures = b.initFigures(static_cast<unsigned>(x.figures.size()));
  for (size_t i = 0; i < x.figures.size(); ++i) {
    auto out = figures[static_cast<unsigned>(i)];
    out.setName(text_of(x.figures[i].name));
    out.setValue(x.figures[i].value);
  }
  auto events = b.initEvents(static_cast<unsigned>(x.events.size()));
  for (size_t i = 0; i < x.events.size(); ++i)
    events.set(static_cast<unsigned>(i), text_of(x.events[i]));
}

void write_trace(wire::ActorReport::Builder b, const std::vector<trace_event>& xs) {
  auto trace = b.initTrace(static_cast<unsigned>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    auto out = trace[static_cast<unsigned>(i)];
    out.setKind(text_of(xs[i].kind));
    out.setStartUs(xs[i].start_us);
    out.setDurationUs(xs[i].duration_us);
    out.setMicrobatchId(xs[i].microbatch_id);
    out.setWeightVersion(xs[i].weight_version);
  }
}

/// A microbatch's sample ids against its payload: none, or one id >= 0 per row.
caf::error check_samples(const microbatch& x) {
  if (x.samples.empty())
    return caf::none;
  const int64_t rows = x.payload.defined() && x.payload.dim() > 0 ? x.payload.size(0) : 0;
  if (static_cast<int64_t>(x.samples.size()) != rows)
    return make_error(errc::shape_mismatch,
                      "samples: " + std::to_string(x.samples.size()) + " ids for a payload of "
                        + std::to_string(rows) + " rows, expected one id per row");
  for (int64_t id : x.samples)
    if (id < 0)
      return make_error(errc::malformed_message,
                        "samples: sample id " + std::to_string(id) + " is negative");
  return caf::none;
}

} // namespace

// -- text ------------------------------------------------------------------------

capnp::Text::Reader text_of(const std::string& x) {
  return {x.c_str(), x.size()};
}

std::string string_of(capnp::Text::Reader x) {
  return {x.begin(), x.size()};
}

// -- encoding ------------------------------------------------------------------

caf::error encoder::text(const std::string& x, const char* what) const {
  if (x.size() <= limits_.max_message_bytes)
    return caf::none;
  return make_error(errc::payload_too_large, std::string{what} + ": text of "
                    + size_text(x.size()) + " exceeds " + limit_text(limits_));
}

caf::error write_fields(encoder& e, wire::Microbatch::Builder b, const microbatch& x) {
  b.setId(x.id);
  b.setStep(x.step);
  b.setEpoch(x.epoch);
  b.setIndexInStep(x.index_in_step);
  b.setStepSize(x.step_size);
  b.setEval(x.eval);
  b.setValidation(x.validation);
  b.setWeightVersion(x.weight_version);
  if (x.payload.defined())
    if (auto err = e.tensor(b.initPayload(), x.payload, "payload"))
      return err;
  auto labels = b.initLabels(static_cast<unsigned>(x.labels.size()));
  for (size_t i = 0; i < x.labels.size(); ++i) {
    const auto& task = x.labels[i];
    auto out = labels[static_cast<unsigned>(i)];
    if (auto err = e.text(task.task, "task name"))
      return err;
    out.setTask(text_of(task.task));
    if (task.values.defined())
      if (auto err = e.tensor(out.initValues(), task.values, "labels of task '" + task.task + "'"))
        return err;
  }
  if (auto err = check_samples(x))
    return err;
  auto samples = b.initSamples(static_cast<unsigned>(x.samples.size()));
  for (size_t i = 0; i < x.samples.size(); ++i)
    samples.set(static_cast<unsigned>(i), x.samples[i]);
  if (x.boundary_input.defined())
    return e.tensor(b.initBoundaryInput(), x.boundary_input, "boundary input");
  return caf::none;
}

caf::error write_fields(encoder& e, wire::Gradient::Builder b, const gradient& x) {
  b.setMicrobatchId(x.microbatch_id);
  b.setStep(x.step);
  b.setWeightVersion(x.weight_version);
  if (x.value.defined())
    if (auto err = e.tensor(b.initValue(), x.value, "gradient"))
      return err;
  auto weights = b.initWeightGradients(static_cast<unsigned>(x.weight_gradients.size()));
  for (size_t i = 0; i < x.weight_gradients.size(); ++i)
    if (x.weight_gradients[i].defined())
      if (auto err = e.tensor(weights[static_cast<unsigned>(i)].initValue(),
                              x.weight_gradients[i], entry_name("weight gradients", i)))
        return err;
  return caf::none;
}

caf::error write_fields(encoder& e, wire::TensorSet::Builder b, const tensor_set& x) {
  if (auto err = e.text(x.kind, "tensor set kind"))
    return err;
  if (auto err = e.text(x.from, "tensor set sender"))
    return err;
  b.setKind(text_of(x.kind));
  b.setFrom(text_of(x.from));
  b.setReplica(x.replica);
  b.setStep(x.step);
  b.setStepSize(x.step_size);
  // Each tensor is checked against the limit here, their sum by the caller.
  auto tensors = b.initTensors(static_cast<unsigned>(x.tensors.size()));
  for (size_t i = 0; i < x.tensors.size(); ++i)
    if (x.tensors[i].defined())
      if (auto err = e.tensor(tensors[static_cast<unsigned>(i)].initValue(), x.tensors[i],
                              entry_name(x.kind, i)))
        return err;
  return caf::none;
}

caf::error write_fields(encoder&, wire::Credit::Builder b, const credit& x) {
  b.setMicrobatchId(x.microbatch_id);
  b.setSlots(x.slots);
  return caf::none;
}

caf::error write_fields(encoder& e, wire::Control::Builder b, const control& x) {
  if (auto err = e.text(x.text, "control text"))
    return err;
  b.setKind(static_cast<wire::ControlKind>(x.kind));
  b.setEpoch(x.epoch);
  b.setValue(x.value);
  b.setText(text_of(x.text));
  return caf::none;
}

caf::error write_fields(encoder&, wire::ActorReport::Builder b, const actor_report& x) {
  b.setActor(text_of(x.actor));
  b.setRole(text_of(x.role));
  b.setTask(text_of(x.task));
  b.setNode(text_of(x.node));
  b.setBusySeconds(x.busy_seconds);
  b.setIdleSeconds(x.idle_seconds);
  b.setSamples(x.samples);
  b.setTrainLoss(x.train_loss);
  b.setTestAccuracy(x.test_accuracy);
  b.setWeightsDigest(text_of(x.weights_digest));
  write_edges(b, x.edges);
  write_epochs(b, x.epochs);
  b.setBubbleSeconds(x.bubble_seconds);
  write_trace(b, x.trace);
  b.setComputeCpuSeconds(x.compute_cpu_seconds);
  b.setProcessCpuSeconds(x.process_cpu_seconds);
  write_figures(b, x);
  return caf::none;
}

caf::error write_fields(encoder&, wire::NodeReport::Builder b, const node_report& x) {
  b.setName(text_of(x.name));
  b.setPeakRssBytes(x.peak_rss_bytes);
  b.setCpuSeconds(x.cpu_seconds);
  b.setCores(x.cores);
  b.setMemoryBytes(x.memory_bytes);
  return caf::none;
}

caf::error write_fields(encoder& e, wire::SpawnRequest::Builder b, const spawn_request& x) {
  if (auto err = e.text(x.spec, "spawn spec"))
    return err;
  b.setRole(text_of(x.role));
  b.setName(text_of(x.name));
  b.setSpec(text_of(x.spec));
  return caf::none;
}

caf::error write_fields(encoder&, wire::Progress::Builder b, const progress& x) {
  b.setActor(text_of(x.actor));
  b.setEpoch(x.epoch);
  b.setSamples(x.samples);
  b.setLoss(x.loss);
  return caf::none;
}

// -- decoding ------------------------------------------------------------------

caf::error decoder::claim(uint64_t count, uint64_t words_each, const char* what) {
  // No overflow: count < 2^29 (capnp's list size) and words_each < 2^17.
  auto words = count * words_each;
  if (words <= unclaimed_words_) {
    unclaimed_words_ -= words;
    return caf::none;
  }
  return make_error(errc::malformed_message,
                    std::string{what} + ": " + std::to_string(count) + " entries need at least "
                      + size_text(words * sizeof(capnp::word)) + ", the message has "
                      + size_text(unclaimed_words_ * sizeof(capnp::word)) + " left for them");
}

caf::error read_fields(decoder& d, wire::Microbatch::Reader r, microbatch& x) {
  x.id = r.getId();
  x.step = r.getStep();
  x.epoch = r.getEpoch();
  x.index_in_step = r.getIndexInStep();
  x.step_size = r.getStepSize();
  x.eval = r.getEval();
  x.validation = r.getValidation();
  x.weight_version = r.getWeightVersion();
  if (r.hasPayload())
    if (auto err = d.tensor(r.getPayload(), "payload", x.payload))
      return err;
  auto labels = r.getLabels();
  if (auto err = claim<wire::TaskLabels>(d, labels, "labels"))
    return err;
  x.labels.resize(labels.size());
  for (unsigned i = 0; i < labels.size(); ++i) {
    auto& task = x.labels[i];
    task.task = string_of(labels[i].getTask());
    if (labels[i].hasValues())
      if (auto err = d.tensor(labels[i].getValues(), "labels of task '" + task.task + "'",
                              task.values))
        return err;
  }
  // A List(Int64) takes its 8 bytes an entry on the wire: nothing to claim.
  auto samples = r.getSamples();
  x.samples.resize(samples.size());
  for (unsigned i = 0; i < samples.size(); ++i)
    x.samples[i] = samples[i];
  if (r.hasBoundaryInput())
    if (auto err = d.tensor(r.getBoundaryInput(), "boundary input", x.boundary_input))
      return err;
  return check_samples(x);
}

caf::error read_fields(decoder& d, wire::Gradient::Reader r, gradient& x) {
  x.microbatch_id = r.getMicrobatchId();
  x.step = r.getStep();
  x.weight_version = r.getWeightVersion();
  if (r.hasValue())
    if (auto err = d.tensor(r.getValue(), "gradient", x.value))
      return err;
  auto weights = r.getWeightGradients();
  if (auto err = claim<wire::OptionalTensor>(d, weights, "weight gradients"))
    return err;
  x.weight_gradients.resize(weights.size());
  for (unsigned i = 0; i < weights.size(); ++i)
    if (weights[i].hasValue())
      if (auto err = d.tensor(weights[i].getValue(), entry_name("weight gradients", i),
                              x.weight_gradients[i]))
        return err;
  return caf::none;
}

caf::error read_fields(decoder& d, wire::TensorSet::Reader r, tensor_set& x) {
  x.kind = string_of(r.getKind());
  x.from = string_of(r.getFrom());
  x.replica = r.getReplica();
  x.step = r.getStep();
  x.step_size = r.getStepSize();
  auto tensors = r.getTensors();
  const char* what = x.kind.empty() ? "tensors" : x.kind.c_str();
  if (auto err = claim<wire::OptionalTensor>(d, tensors, what))
    return err;
  x.tensors.resize(tensors.size());
  for (unsigned i = 0; i < tensors.size(); ++i)
    if (tensors[i].hasValue())
      if (auto err = d.tensor(tensors[i].getValue(), entry_name(x.kind, i), x.tensors[i]))
        return err;
  return caf::none;
}

caf::error read_fields(decoder&, wire::Credit::Reader r, credit& x) {
  x.microbatch_id = r.getMicrobatchId();
  x.slots = r.getSlots();
  return caf::none;
}

caf::error read_fields(decoder&, wire::Control::Reader r, control& x) {
  auto kind = static_cast<unsigned>(r.getKind());
  if (kind > static_cast<unsigned>(control_kind::shutdown))
    return make_error(errc::malformed_message,
                      "control kind " + std::to_string(kind) + " is unknown to this build");
  x.kind = static_cast<control_kind>(kind);
  x.epoch = r.getEpoch();
  x.value = r.getValue();
  x.text = string_of(r.getText());
  return caf::none;
}

caf::error read_figures(decoder& d, wire::ActorReport::Reader r, actor_report& x) {
  auto figures = r.getFigures();
  auto events = r.getEvents();
  if (auto err = claim<wire::NamedFigure>(d, figures, "figures"))
    return err;
  if (auto err = d.claim(events.size(), 1, "events")) // a pointer per entry
    return err;
  x.figures.reserve(figures.size());
  for (auto f : figures)
    x.figures.push_back(named_figure{string_of(f.getName()), f.getValue()});
  x.events.reserve(events.size());
  for (auto e : events)
    x.events.push_back(string_of(e));
  return caf::none;
}

caf::error read_fields(decoder& d, wire::ActorReport::Reader r, actor_report& x) {
  x.actor = string_of(r.getActor());
  x.role = string_of(r.getRole());
  x.task = string_of(r.getTask());
  x.node = string_of(r.getNode());
  x.busy_seconds = r.getBusySeconds();
  x.idle_seconds = r.getIdleSeconds();
  x.samples = r.getSamples();
  x.train_loss = r.getTrainLoss();
  x.test_accuracy = r.getTestAccuracy();
  x.weights_digest = string_of(r.getWeightsDigest());
  auto edges = r.getEdges();
  auto epochs = r.getEpochs();
  auto trace = r.getTrace();
  if (auto err = claim<wire::EdgeStats>(d, edges, "edges"))
    return err;
  if (auto err = claim<wire::EpochResult>(d, epochs, "epochs"))
    return err;
  if (auto err = claim<wire::TraceEvent>(d, trace, "trace"))
    return err;
  x.edges.reserve(edges.size());
  for (auto edge : edges)
    x.edges.push_back(edge_stats{string_of(edge.getFrom()), string_of(edge.getTo()),
                                 edge.getMessages(), edge.getBytes()});
  x.epochs.reserve(epochs.size());
  for (auto epoch : epochs)
    x.epochs.push_back(epoch_result{epoch.getEpoch(), epoch.getTrainLoss(),
                                    epoch.getTestAccuracy(), epoch.getSamples(),
                                    epoch.getValidationAccuracy(), epoch.getEvaluated(),
                                    epoch.getValidated()});
  x.bubble_seconds = r.getBubbleSeconds();
  x.trace.reserve(trace.size());
  for (auto event : trace)
    x.trace.push_back(trace_event{string_of(event.getKind()), event.getStartUs(),
                                  event.getDurationUs(), event.getMicrobatchId(),
                                  event.getWeightVersion()});
  x.compute_cpu_seconds = r.getComputeCpuSeconds();
  x.process_cpu_seconds = r.getProcessCpuSeconds();
  return read_figures(d, r, x);
}

caf::error read_fields(decoder&, wire::NodeReport::Reader r, node_report& x) {
  x.name = string_of(r.getName());
  x.peak_rss_bytes = r.getPeakRssBytes();
  x.cpu_seconds = r.getCpuSeconds();
  x.cores = r.getCores();
  x.memory_bytes = r.getMemoryBytes();
  return caf::none;
}

caf::error read_fields(decoder&, wire::SpawnRequest::Reader r, spawn_request& x) {
  x.role = string_of(r.getRole());
  x.name = string_of(r.getName());
  x.spec = string_of(r.getSpec());
  return caf::none;
}

caf::error read_fields(decoder&, wire::Progress::Reader r, progress& x) {
  x.actor = string_of(r.getActor());
  x.epoch = r.getEpoch();
  x.samples = r.getSamples();
  x.loss = r.getLoss();
  return caf::none;
}

} // namespace baton::messages::detail

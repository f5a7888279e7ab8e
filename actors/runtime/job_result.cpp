#include "actors/runtime/job_result.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// `by_head[head]`, or nullptr.
template <class T>
const std::map<int32_t, T>* of_head(const std::map<std::string, std::map<int32_t, T>>& by_head,
                                    const std::string& head) {
  auto it = by_head.find(head);
  return it == by_head.end() ? nullptr : &it->second;
}

/// A head of the metrics' "heads", with its epochs' times and bytes of `r`.
nlohmann::json head_json(const job_result& r, const messages::actor_report& h) {
  const auto* seconds = of_head(r.epoch_seconds, h.actor);
  const auto* bytes = of_head(r.epoch_bytes, h.actor);
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : h.epochs) {
    epochs.push_back({{"epoch", e.epoch + 1},
                      {"train_loss", e.train_loss},
                      {"test_accuracy", e.test_accuracy},
                      {"samples", e.samples}});
    if (e.validation_accuracy >= 0)
      epochs.back()["validation_accuracy"] = e.validation_accuracy;
    if (seconds != nullptr && seconds->count(e.epoch))
      epochs.back()["seconds"] = seconds->at(e.epoch);
    if (bytes != nullptr && bytes->count(e.epoch))
      epochs.back()["bytes_sent"] = bytes->at(e.epoch);
  }
  nlohmann::json head = {{"name", h.actor},           {"task", h.task},
                         {"test_accuracy", h.test_accuracy}, {"train_loss", h.train_loss},
                         {"samples", h.samples},      {"weights_digest", h.weights_digest},
                         {"node", h.node},            {"epochs", epochs}};
  if (!h.epochs.empty() && h.epochs.back().validation_accuracy >= 0)
    head["validation_accuracy"] = h.epochs.back().validation_accuracy;
  if (auto best = r.best_epochs.find(h.actor); best != r.best_epochs.end())
    head["best_epoch"] = best->second + 1;
  return head;
}

/// `h`'s epoch `epoch` (from 0), or nullptr.
const messages::epoch_result* epoch_of(const messages::actor_report& h, int32_t epoch) {
  for (const auto& e : h.epochs)
    if (e.epoch == epoch)
      return &e;
  return nullptr;
}

/// Whether some result has validation accuracies.
bool has_validation(const job_result& r) {
  for (const auto& h : r.heads)
    if (!h.epochs.empty() && h.epochs.back().validation_accuracy >= 0)
      return true;
  return false;
}

/// A training number from the metrics JSON; a diverged run's NaN loss is
/// written as null by nlohmann::json and reads back as NaN.
double number(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}

messages::actor_report head_from_json(const nlohmann::json& j) {
  messages::actor_report h;
  h.actor = j.at("name").get<std::string>();
  h.role = "head";
  h.task = j.at("task").get<std::string>();
  h.test_accuracy = number(j, "test_accuracy");
  h.train_loss = number(j, "train_loss");
  h.samples = j.at("samples").get<int64_t>();
  h.weights_digest = j.at("weights_digest").get<std::string>();
  h.node = j.value("node", "");
  for (const auto& e : j.value("epochs", nlohmann::json::array()))
    h.epochs.push_back({e.at("epoch").get<int32_t>() - 1, number(e, "train_loss"),
                        number(e, "test_accuracy"), e.at("samples").get<int64_t>(),
                        e.value("validation_accuracy", -1.0)});
  return h;
}

/// `seconds` as a fraction of an actor's lifetime (busy + idle); 0 when the
/// actor never started.
double fraction_of_life(double seconds, const messages::actor_report& a) {
  auto life = a.busy_seconds + a.idle_seconds;
  return life > 0 ? seconds / life : 0.0;
}

/// `bytes` as a table shows it: "12.3 MiB".
std::string mib_text(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

/// An actor's role-specific figures (an object, name -> value) and events
/// (an array; each a JSON object when it parses as one, else its text).
void add_figures_and_events(const messages::actor_report& a, nlohmann::json& actor) {
  if (!a.figures.empty()) {
    auto& figures = actor["figures"] = nlohmann::json::object();
    for (const auto& f : a.figures)
      figures[f.name] = f.value;
  }
  if (a.events.empty())
    return;
  auto& events = actor["events"] = nlohmann::json::array();
  for (const auto& e : a.events) {
    auto parsed = nlohmann::json::parse(e, nullptr, false);
    events.push_back(parsed.is_discarded() ? nlohmann::json(e) : parsed);
  }
}

/// add_figures_and_events read back (events as their compact JSON text).
void read_figures_and_events(const nlohmann::json& actor, messages::actor_report& a) {
  const auto figures = actor.value("figures", nlohmann::json::object());
  for (const auto& [name, value] : figures.items())
    a.figures.push_back({name, value.get<double>()});
  const auto events = actor.value("events", nlohmann::json::array());
  for (const auto& e : events)
    a.events.push_back(e.is_string() ? e.get<std::string>() : e.dump());
}

/// One actor of the metrics' "actors".
nlohmann::json actor_json(const messages::actor_report& a) {
  nlohmann::json actor = {{"name", a.actor},
                          {"role", a.role},
                          {"node", a.node},
                          {"busy_seconds", a.busy_seconds},
                          {"idle_seconds", a.idle_seconds},
                          {"bubble_seconds", a.bubble_seconds},
                          {"busy_fraction", fraction_of_life(a.busy_seconds, a)},
                          {"idle_fraction", fraction_of_life(a.idle_seconds, a)},
                          {"bubble_fraction", fraction_of_life(a.bubble_seconds, a)}};
  if (!a.weights_digest.empty())
    actor["weights_digest"] = a.weights_digest; // trainable actors
  if (a.process_cpu_seconds > 0) {              // actors that measure their CPU
    actor["compute_cpu_seconds"] = a.compute_cpu_seconds;
    actor["process_cpu_seconds"] = a.process_cpu_seconds;
  }
  add_figures_and_events(a, actor);
  return actor;
}

/// A fault record; detected_after_ms only when known (never the -1 of an
/// unknown time).
nlohmann::json fault_json(const fault_record& f) {
  nlohmann::json j{{"kind", f.kind},
                   {"target", f.target},
                   {"at_step", f.at_step},
                   {"recovered_after_ms", f.recovered_after_ms},
                   {"restored_step", f.restored_step}};
  if (f.detected_after_ms >= 0)
    j["detected_after_ms"] = f.detected_after_ms;
  return j;
}

nlohmann::json stop_json(const early_stop& s) {
  nlohmann::json j = {{"actor", s.actor},
                      {"epoch", s.epoch + 1},
                      {"test_accuracy", s.test_accuracy},
                      {"seconds", s.seconds},
                      {"reason", s.reason}};
  if (s.reason == "early_stopping") {
    j["best_epoch"] = s.best_epoch + 1;
    j["best_validation_accuracy"] = s.best_validation_accuracy;
    j["patience"] = s.patience;
  }
  return j;
}

early_stop stop_from_json(const nlohmann::json& s) {
  early_stop out{s.at("actor").get<std::string>(), s.at("epoch").get<int32_t>() - 1,
                 s.at("test_accuracy").get<double>(), s.at("seconds").get<double>(),
                 s.value("reason", "stop_at_accuracy")};
  out.best_epoch = s.value("best_epoch", 0) - 1;
  out.best_validation_accuracy = s.value("best_validation_accuracy", 0.0);
  out.patience = s.value("patience", 0);
  return out;
}

} // namespace

std::string strategy_of(const job_result& r) {
  return r.mode.empty() ? r.job : r.mode;
}

std::optional<steady_training> steady_of(const job_result& r, const std::string& actor,
                                         int64_t samples, double seconds) {
  if (r.restarts > 0 || r.heads.empty() || samples <= 0 || seconds <= 0)
    return std::nullopt;
  for (const auto& a : r.actors)
    if (a.actor == actor && a.samples >= samples) {
      double share = static_cast<double>(samples) / static_cast<double>(a.samples);
      return steady_training{std::llround(static_cast<double>(r.heads.front().samples) * share),
                             seconds};
    }
  return std::nullopt;
}

nlohmann::json to_json(const job_result& r) {
  nlohmann::json j;
  j["job"] = r.job;
  j["mode"] = strategy_of(r);
  j["run"] = r.run;
  j["result_label"] = r.result_label;
  j["topology"] = r.topology_file;
  j["wall_seconds"] = r.wall_seconds;
  j["train_seconds"] = r.train_seconds;
  if (r.steady)
    j["steady"] = {{"samples", r.steady->samples}, {"seconds", r.steady->seconds}};
  j["heads"] = nlohmann::json::array();
  for (const auto& h : r.heads)
    j["heads"].push_back(head_json(r, h));
  j["nodes"] = nlohmann::json::array();
  for (const auto& n : r.nodes)
    j["nodes"].push_back({{"name", n.name},
                          {"peak_rss_bytes", n.peak_rss_bytes},
                          {"cpu_seconds", n.cpu_seconds},
                          {"cores", n.cores},
                          {"memory_bytes", n.memory_bytes}});
  j["edges"] = nlohmann::json::array();
  j["actors"] = nlohmann::json::array();
  for (const auto& a : r.actors) {
    for (const auto& e : a.edges)
      j["edges"].push_back(
        {{"from", e.from}, {"to", e.to}, {"messages", e.messages}, {"bytes", e.bytes}});
    j["actors"].push_back(actor_json(a));
  }
  j["restarts"] = r.restarts;
  j["faults"] = nlohmann::json::array();
  for (const auto& f : r.faults)
    j["faults"].push_back(fault_json(f));
  j["trained"] = nlohmann::json::object();
  for (const auto& [actor, count] : r.trained)
    j["trained"][actor] = {{"trained", count.trained}, {"duplicates", count.duplicates}};
  if (!r.checkpoint_dir.empty())
    j["checkpoint_dir"] = r.checkpoint_dir;
  if (r.stopped)
    j["stopped"] = stop_json(*r.stopped);
  if (!r.failed.empty())
    j["failed"] = r.failed;
  if (r.saved_best)
    j["saved"] = "best";
  if (r.normalisation)
    j["normalisation"] = {{"mean", r.normalisation->mean},
                          {"std", r.normalisation->std},
                          {"source", r.normalisation->source}};
  if (!r.settled.empty())
    j["settled"] = r.settled;
  return j;
}

namespace {

// A result group of the metrics, with its epochs' seconds and bytes.
void read_head(const nlohmann::json& h, job_result& r) {
  r.heads.push_back(head_from_json(h));
  if (h.contains("best_epoch"))
    r.best_epochs[r.heads.back().actor] = h.at("best_epoch").get<int32_t>() - 1;
  for (const auto& e : h.value("epochs", nlohmann::json::array())) {
    const auto& head = r.heads.back().actor;
    const int32_t epoch = e.at("epoch").get<int32_t>() - 1;
    if (e.contains("seconds"))
      r.epoch_seconds[head][epoch] = e.at("seconds").get<double>();
    if (e.contains("bytes_sent"))
      r.epoch_bytes[head][epoch] = e.at("bytes_sent").get<int64_t>();
  }
}

// An actor of the metrics (its edges are read from the flat edge list).
messages::actor_report actor_from_json(const nlohmann::json& a) {
  messages::actor_report x;
  x.actor = a.at("name").get<std::string>();
  x.role = a.at("role").get<std::string>();
  x.node = a.value("node", "");
  x.busy_seconds = a.at("busy_seconds").get<double>();
  x.idle_seconds = a.at("idle_seconds").get<double>();
  x.bubble_seconds = a.value("bubble_seconds", 0.0);
  x.compute_cpu_seconds = a.value("compute_cpu_seconds", 0.0);
  x.process_cpu_seconds = a.value("process_cpu_seconds", 0.0);
  x.weights_digest = a.value("weights_digest", "");
  read_figures_and_events(a, x);
  return x;
}

} // namespace

caf::expected<job_result> job_result_from_json(const nlohmann::json& j) {
  try {
    job_result r;
    r.job = j.at("job").get<std::string>();
    r.mode = j.at("mode").get<std::string>();
    r.run = j.value("run", "actors");
    r.result_label = j.value("result_label", "head");
    r.topology_file = j.value("topology", "");
    r.wall_seconds = j.at("wall_seconds").get<double>();
    r.train_seconds = j.value("train_seconds", 0.0);
    if (j.contains("steady"))
      r.steady = steady_training{j.at("steady").at("samples").get<int64_t>(),
                                 j.at("steady").at("seconds").get<double>()};
    for (const auto& h : j.at("heads"))
      read_head(h, r);
    for (const auto& n : j.at("nodes"))
      r.nodes.push_back({n.at("name").get<std::string>(), n.at("peak_rss_bytes").get<int64_t>(),
                         n.at("cpu_seconds").get<double>(), n.value("cores", 0),
                         n.value("memory_bytes", int64_t{0}), {}});
    for (const auto& a : j.at("actors"))
      r.actors.push_back(actor_from_json(a));
    r.restarts = j.value("restarts", 0);
    for (const auto& f : j.value("faults", nlohmann::json::array()))
      r.faults.push_back({f.at("kind").get<std::string>(), f.at("target").get<std::string>(),
                          f.at("at_step").get<int64_t>(), f.value("detected_after_ms", int64_t{-1}),
                          f.at("recovered_after_ms").get<int64_t>(),
                          f.value("restored_step", int64_t{-1})});
    // Not `j.value(...).items()` in the loop header: the temporary would end
    // before the loop.
    auto trained = j.value("trained", nlohmann::json::object());
    for (const auto& [actor, count] : trained.items())
      r.trained[actor] = {count.at("trained").get<int64_t>(),
                          count.at("duplicates").get<int64_t>()};
    r.checkpoint_dir = j.value("checkpoint_dir", "");
    if (j.contains("stopped"))
      r.stopped = stop_from_json(j.at("stopped"));
    r.failed = j.value("failed", "");
    r.saved_best = j.value("saved", "") == "best";
    r.settled = j.value("settled", std::vector<std::string>{});
    if (j.contains("normalisation")) {
      const auto& n = j.at("normalisation");
      r.normalisation = model::input_normalisation{n.at("mean").get<std::vector<double>>(),
                                                   n.at("std").get<std::vector<double>>(),
                                                   n.value("source", "")};
    }
    // Edges are listed flat; each belongs to the actor that sent on it.
    for (const auto& e : j.value("edges", nlohmann::json::array()))
      for (auto& a : r.actors)
        if (a.actor == e.at("from").get<std::string>())
          a.edges.push_back({e.at("from").get<std::string>(), e.at("to").get<std::string>(),
                             e.at("messages").get<int64_t>(), e.at("bytes").get<int64_t>()});
    return r;
  } catch (const std::exception& e) {
    return make_error(errc::malformed_message, std::string{"metrics JSON: "} + e.what());
  }
}

caf::expected<void> write_metrics(const job_result& r, const std::string& path) {
  // All or nothing: a full disk keeps the previous file, no temporary file.
  if (auto why = model::try_replace_file(path, to_json(r).dump(2) + '\n'); !why.empty())
    return make_error(errc::bad_file, "--metrics-out: " + why);
  return caf::unit;
}

std::string non_finite_losses(const job_result& r) {
  std::string rows;
  for (const auto& h : r.heads) {
    int32_t first = -1;
    for (const auto& e : h.epochs)
      if (!std::isfinite(e.train_loss)) {
        first = e.epoch;
        break;
      }
    if (first < 0 && !std::isfinite(h.train_loss))
      first = h.epochs.empty() ? 0 : h.epochs.back().epoch;
    if (first >= 0)
      rows += (rows.empty() ? "" : ", ") +
              (h.actor == r.result_label ? "" : r.result_label + " ") + "'" + h.actor +
              "' from epoch " + std::to_string(first + 1);
  }
  return rows;
}

std::string results_table(const job_result& r) {
  std::ostringstream out;
  char line[256];
  const bool validation = has_validation(r);
  std::snprintf(line, sizeof line, "%-12s %-10s %10s%s %10s %9s  %s\n", r.result_label.c_str(),
                "task", "test acc", validation ? "    val acc" : "", "train loss", "samples",
                "weights (sha256)");
  out << line;
  for (const auto& h : r.heads) {
    char val[32] = "";
    const double last = h.epochs.empty() ? 0.0 : h.epochs.back().validation_accuracy;
    if (validation)
      std::snprintf(val, sizeof val, " %9.2f%%", 100 * std::max(0.0, last));
    std::snprintf(line, sizeof line, "%-12s %-10s %9.2f%%%s %10.4f %9lld  %.16s\n",
                  h.actor.c_str(), h.task.c_str(), 100 * h.test_accuracy, val, h.train_loss,
                  static_cast<long long>(h.samples), h.weights_digest.c_str());
    out << line;
  }
  for (const auto& h : r.heads) {
    auto best = r.best_epochs.find(h.actor);
    const auto* e = best == r.best_epochs.end() ? nullptr : epoch_of(h, best->second);
    if (e == nullptr)
      continue;
    std::snprintf(line, sizeof line,
                  "%s: best epoch %d by validation accuracy (%.2f%%, test %.2f%%)%s\n",
                  h.actor.c_str(), e->epoch + 1, 100 * e->validation_accuracy,
                  100 * e->test_accuracy,
                  r.saved_best ? ": its weights are the saved model (save: best)" : "");
    out << line;
  }
  if (r.heads.empty() && !r.failed.empty())
    out << "(no " << r.result_label << " reported a result before the run failed)\n";
  std::snprintf(line, sizeof line, "%s (%s): %.1f s wall, %s peak memory over %zu process(es)\n",
                strategy_of(r).c_str(), r.run.c_str(), r.wall_seconds,
                mib_text(total_peak_rss(r)).c_str(), r.nodes.size());
  out << line;
  if (r.stopped && r.stopped->epoch < 0) {
    std::snprintf(line, sizeof line,
                  "stopped at the time budget, %.1f s, before an epoch ended "
                  "(runtime.stop_after_seconds)\n",
                  r.stopped->seconds);
    out << line;
  } else if (r.stopped && r.stopped->reason == "early_stopping") {
    std::snprintf(line, sizeof line,
                  "stopped after epoch %d: %s had %d epoch%s without a higher validation "
                  "accuracy than epoch %d's %.2f%% (early_stopping.patience)\n",
                  r.stopped->epoch + 1, r.stopped->actor.c_str(),
                  r.stopped->epoch - r.stopped->best_epoch,
                  r.stopped->epoch - r.stopped->best_epoch == 1 ? "" : "s",
                  r.stopped->best_epoch + 1,
                  100 * r.stopped->best_validation_accuracy);
    out << line;
  } else if (r.stopped) {
    std::snprintf(line, sizeof line,
                  r.stopped->reason == "stop_at_accuracy"
                    ? "stopped after epoch %d: %s reached %.2f%% at %.1f s "
                      "(target_accuracy)\n"
                    : "stopped at the time budget after epoch %d: %s at %.2f%%, %.1f s "
                      "(runtime.stop_after_seconds)\n",
                  r.stopped->epoch + 1, r.stopped->actor.c_str(), 100 * r.stopped->test_accuracy,
                  r.stopped->seconds);
    out << line;
  }
  return out.str();
}

int64_t total_peak_rss(const job_result& r) {
  int64_t sum = 0;
  for (const auto& n : r.nodes)
    sum += n.peak_rss_bytes;
  return sum;
}

int64_t total_edge_bytes(const job_result& r) {
  int64_t sum = 0;
  for (const auto& a : r.actors)
    for (const auto& e : a.edges)
      sum += e.bytes;
  return sum;
}

} // namespace runtime
} // namespace baton::actors

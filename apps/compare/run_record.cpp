#include "apps/compare/run_record.hpp"

#include <algorithm>
#include <map>

#include "actors/modes/registry.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

/// `j[key]` as a number; `fallback` when it is missing or not a number
/// (metrics made elsewhere are read, never trusted).
double number(const json& j, const char* key, double fallback = 0) {
  if (!j.is_object())
    return fallback;
  auto i = j.find(key);
  return i != j.end() && i->is_number() ? i->get<double>() : fallback;
}

/// `j[key]` as a string; "" when it is missing or not a string.
std::string text(const json& j, const char* key) {
  if (!j.is_object())
    return {};
  auto i = j.find(key);
  return i != j.end() && i->is_string() ? i->get<std::string>() : std::string{};
}

/// `j[key]` if it is an object, else an empty one.
const json& object(const json& j, const char* key) {
  static const json empty = json::object();
  if (!j.is_object())
    return empty;
  auto i = j.find(key);
  return i != j.end() && i->is_object() ? *i : empty;
}

/// `j[key]` if it is an array, else an empty one.
const json& array(const json& j, const char* key) {
  static const json empty = json::array();
  if (!j.is_object())
    return empty;
  auto i = j.find(key);
  return i != j.end() && i->is_array() ? *i : empty;
}

/// The actors that train, and so whose time splits a row: those of the
/// roles the registry says train (actors::role_trains).
bool trainable(const json& actor) {
  return actors::role_trains(text(actor, "role"));
}

/// Seconds into training when `epoch` (from 1) of `head` was complete: its
/// "seconds", or, for metrics without them (`--mode local` wrote none
/// before issue 34), the training time spread evenly over the epochs run
/// (`estimated` is set).
double epoch_seconds(const json& e, const json& metrics, size_t epochs_run, bool& estimated) {
  if (auto at = number(e, "seconds", -1); at >= 0)
    return at;
  estimated = true;
  auto train = number(metrics, "train_seconds", number(metrics, "wall_seconds"));
  return epochs_run > 0 ? train * number(e, "epoch") / epochs_run : 0;
}

/// Time and epochs to target of every result row (a run reaches the target
/// when all of its rows do: the last of them decides), the best and final
/// accuracy (the worst row's), the first row's curve.
void accuracy_figures(const json& metrics, std::optional<double> target, json& s) {
  bool estimated = false, reached = true;
  double time = 0, best = 1, final_accuracy = 1;
  int64_t epochs = 0, epochs_run = 0;
  json curve = json::array();
  const auto& heads = array(metrics, "heads");
  for (const auto& head : heads) {
    const auto& es = array(head, "epochs");
    double head_best = 0;
    std::optional<std::pair<double, int64_t>> hit;
    for (const auto& e : es) {
      auto acc = number(e, "test_accuracy");
      auto at = epoch_seconds(e, metrics, es.size(), estimated);
      head_best = std::max(head_best, acc);
      if (!hit && (!target || acc >= *target))
        hit = {{at, static_cast<int64_t>(number(e, "epoch"))}};
      if (&head == &heads.front())
        curve.push_back({{"epoch", number(e, "epoch")}, {"seconds", at}, {"test_accuracy", acc}});
    }
    if (!target && !es.empty()) // no target: the whole training
      hit = {{epoch_seconds(es.back(), metrics, es.size(), estimated),
              static_cast<int64_t>(number(es.back(), "epoch"))}};
    reached = reached && hit.has_value();
    if (hit) {
      time = std::max(time, hit->first);
      epochs = std::max(epochs, hit->second);
    }
    best = std::min(best, head_best);
    final_accuracy = std::min(final_accuracy, es.empty() ? 0.0 : number(es.back(), "test_accuracy"));
    epochs_run = std::max<int64_t>(epochs_run, es.size());
  }
  reached = reached && !heads.empty();
  s["reached"] = reached;
  s["time_to_target_seconds"] = reached ? json(time) : json(nullptr);
  s["epochs_to_target"] = reached ? json(epochs) : json(nullptr);
  s["time_estimated"] = estimated;
  s["best_accuracy"] = heads.empty() ? 0.0 : best;
  s["final_accuracy"] = heads.empty() ? 0.0 : final_accuracy;
  s["epochs_run"] = epochs_run;
  s["curve"] = std::move(curve);
}

/// Optimiser steps of the run, as each strategy counts them: a data-parallel
/// worker's own count (figures.steps: every step, or every local step of
/// local SGD); else the microbatches a trainable actor trained (IST: local
/// steps; pipeline: microbatches, divided by the microbatches per step of
/// gpipe and 1f1b-flush when `settings` says); else (`--mode local`, no
/// actors' counts) the samples over settings' global batch. 0: unknown.
double optimiser_steps(const json& metrics, const json& settings) {
  double steps = 0;
  for (const auto& a : array(metrics, "actors"))
    steps = std::max(steps, number(object(a, "figures"), "steps"));
  if (steps > 0)
    return steps;
  for (const auto& [actor, count] : object(metrics, "trained").items())
    steps = std::max(steps, number(count, "trained"));
  if (steps > 0)
    return steps / std::max(1.0, number(settings, "microbatches_per_step", 1));
  const auto& heads = array(metrics, "heads");
  auto batch = number(settings, "global_batch");
  return batch > 0 && !heads.empty() ? number(heads.front(), "samples") / batch : 0;
}

/// Bytes that crossed from one node to another: every edge, except those
/// whose two ends are actors on the same node (in-process messages are not
/// on the wire). An end that is no actor (a pipeline stage's "upstream") is
/// assumed remote.
double wire_bytes(const json& metrics) {
  std::map<std::string, std::string> node_of;
  for (const auto& a : array(metrics, "actors"))
    node_of[text(a, "name")] = text(a, "node");
  double bytes = 0;
  for (const auto& e : array(metrics, "edges")) {
    auto from = node_of.find(text(e, "from")), to = node_of.find(text(e, "to"));
    bool local = from != node_of.end() && to != node_of.end() && from->second == to->second;
    if (!local)
      bytes += number(e, "bytes");
  }
  return bytes;
}

/// The largest node's peak RSS, and the nodes' CPU seconds over the
/// training time x the cores: a node's cpu_seconds are those of training
/// (the runtime subtracts its start-up's), so the interval is the same;
/// local nodes share this machine, so its cores (the largest node count)
/// are the denominator, not their sum.
void machine_figures(const json& metrics, json& s) {
  double peak = 0, cpu = 0, cores = 0;
  for (const auto& n : array(metrics, "nodes")) {
    peak = std::max(peak, number(n, "peak_rss_bytes"));
    cpu += number(n, "cpu_seconds");
    cores = std::max(cores, number(n, "cores"));
  }
  auto train = number(metrics, "train_seconds", number(metrics, "wall_seconds"));
  s["peak_rss_bytes"] = static_cast<int64_t>(peak);
  s["cpu_utilisation"] = train > 0 && cores > 0 ? cpu / (train * cores) : 0.0;
}

/// Where the trainable actors' time went, summed over them (each actor's
/// busy + idle is its time from its first message to its last):
/// - compute: busy, handling a message (forward, backward, optimiser step,
///   and serialising what it sends);
/// - communication: idle but not in a bubble: waiting for a peer's message
///   (gradients of the ring or from the shards, activations or gradients of
///   a neighbour stage beyond its schedule, subnets of IST);
/// - waiting: bubble: idle because the schedule has no work for it
///   (gpipe's fill and drain, 1f1b-flush's flush).
/// A run without actors' times (`--mode local`: one loop, no messages) is
/// all compute.
json time_split(const json& metrics) {
  double busy = 0, idle = 0, bubble = 0;
  for (const auto& a : array(metrics, "actors")) {
    if (!trainable(a))
      continue;
    busy += number(a, "busy_seconds");
    idle += number(a, "idle_seconds");
    bubble += number(a, "bubble_seconds");
  }
  auto total = busy + idle;
  if (total <= 0)
    return {{"compute", 1.0}, {"communication", 0.0}, {"waiting", 0.0}};
  bubble = std::min(bubble, idle);
  return {{"compute", busy / total},
          {"communication", (idle - bubble) / total},
          {"waiting", bubble / total}};
}

/// The step after the warm-up (the metrics' `steady`: from the first
/// progress report to the end), at the run's samples per step; null for a
/// run too short to report. What the cost model predicts: a steady step,
/// without the first steps' page faults and allocations, which weigh on a
/// short run's mean.
json steady_step_seconds(const json& metrics, double samples, double steps) {
  auto it = metrics.find("steady");
  if (it == metrics.end() || !it->is_object() || steps <= 0 || samples <= 0)
    return nullptr;
  const double steady_samples = number(*it, "samples");
  const double seconds = number(*it, "seconds");
  if (steady_samples <= 0 || seconds <= 0)
    return nullptr;
  return seconds / (steady_samples / (samples / steps));
}

} // namespace

json summarize(const json& metrics, std::optional<double> target, const json& settings) {
  json s = json::object();
  accuracy_figures(metrics, target, s);
  auto train = number(metrics, "train_seconds", number(metrics, "wall_seconds"));
  const auto& heads = array(metrics, "heads");
  auto samples = heads.empty() ? 0 : number(heads.front(), "samples");
  s["train_seconds"] = train;
  s["wall_seconds"] = number(metrics, "wall_seconds");
  s["samples_per_second"] = train > 0 ? samples / train : 0.0;
  auto steps = optimiser_steps(metrics, settings);
  auto bytes = wire_bytes(metrics);
  auto epochs = s["epochs_run"].get<int64_t>();
  s["steps"] = steps > 0 ? json(static_cast<int64_t>(steps + 0.5)) : json(nullptr);
  s["step_seconds"] = steps > 0 ? json(train / steps) : json(nullptr);
  s["steady_step_seconds"] = steady_step_seconds(metrics, samples, steps);
  s["bytes_per_step"] = steps > 0 ? json(bytes / steps) : json(nullptr);
  s["bytes_per_epoch"] = epochs > 0 ? bytes / epochs : 0.0;
  machine_figures(metrics, s);
  s["time_split"] = time_split(metrics);
  return s;
}

json run_record(const std::string& label, const std::string& strategy, const std::string& command,
                const json& metrics, std::optional<double> target, const json& settings) {
  json r{{"label", label},       {"strategy", strategy}, {"command", command},
         {"settings", settings}, {"metrics", metrics},   {"summary", summarize(metrics, target, settings)}};
  return r;
}

} // namespace baton::apps

#include "apps/bench/step_split.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "messages/crossing_cpu.hpp"

namespace baton::apps {
inline namespace bench {

using actors::job_result;

nlohmann::json step_split::to_json() const {
  nlohmann::json j = {{"compute", compute},     {"waiting", waiting},
                      {"bubble", bubble},       {"imbalance", imbalance},
                      {"overhead", overhead},   {"serialisation", serialisation},
                      {"wire", wire}};
  if (cpu_beyond_compute >= 0)
    j["cpu_beyond_compute"] = cpu_beyond_compute;
  return j;
}

namespace {

/// One compute actor's seconds over the run.
struct actor_time {
  double compute = 0;
  double waited = 0;
};

/// The training time of `r` (its wall time when unknown).
double training_seconds(const job_result& r) {
  return r.train_seconds > 0 ? r.train_seconds : r.wall_seconds;
}

/// The fractions of `actors` over the training time of `r`; what the actors
/// waited beyond the imbalance goes to `bubble` (stages) or `waiting`.
step_split split_of(const job_result& r, const std::vector<actor_time>& actors, bool stages) {
  step_split s;
  s.stages = stages;
  const double seconds = training_seconds(r);
  if (actors.empty() || seconds <= 0)
    return s;
  s.actors = static_cast<int32_t>(actors.size());
  double compute = 0, waited = 0, slowest = 0;
  for (const auto& a : actors) {
    compute += a.compute;
    waited += a.waited;
    slowest = std::max(slowest, a.compute);
  }
  compute /= s.actors;
  waited /= s.actors;
  s.compute = compute / seconds;
  // The others wait for the slowest actor's extra compute: imbalance, not
  // the strategy's own waiting (as far as they waited at all).
  s.imbalance = std::min(waited, slowest - compute) / seconds;
  (stages ? s.bubble : s.waiting) = waited / seconds - s.imbalance;
  s.overhead = 1 - s.compute - waited / seconds;
  return s;
}

double figure(const messages::actor_report& a, const std::string& name) {
  for (const auto& f : a.figures)
    if (f.name == name)
      return f.value;
  return 0;
}

/// `value` summed over the run's processes: the actors of one process report
/// its counters, each since its own start, so the widest is taken.
template <class Value>
double over_processes(const job_result& r, Value value) {
  std::map<std::string, double> of_process;
  for (const auto& a : r.actors) {
    auto& widest = of_process[a.node];
    widest = std::max(widest, value(a));
  }
  double sum = 0;
  for (const auto& [node, seconds] : of_process)
    sum += seconds;
  return sum;
}

/// The CPU seconds that the run's processes spent on crossing messages
/// (activity.hpp's figures).
messages::crossing_cpu crossing_seconds(const job_result& r) {
  return {over_processes(r, [](const auto& a) { return figure(a, "serialisation_cpu_seconds"); }),
          over_processes(r, [](const auto& a) { return figure(a, "wire_cpu_seconds"); })};
}

/// Adds to `s` the CPU of crossing messages over the lives of `role`'s actors.
void add_crossing(const job_result& r, const std::string& role, step_split& s) {
  double lives = 0;
  for (const auto& a : r.actors)
    if (a.role == role)
      lives += a.busy_seconds + a.idle_seconds;
  if (lives <= 0)
    return;
  const auto crossing = crossing_seconds(r);
  s.serialisation = crossing.serialisation / lives;
  s.wire = crossing.wire / lives;
}

} // namespace

step_split split_of_pipeline(const job_result& r) {
  std::vector<actor_time> actors;
  double compute_cpu = 0;
  for (const auto& a : r.actors)
    if (a.role == "pipeline_stage") {
      actors.push_back({a.busy_seconds, a.bubble_seconds});
      compute_cpu += a.compute_cpu_seconds;
    }
  // Each stage reports its process's CPU over its own training: stages that
  // share a process (embedded) report the same CPU, counted once.
  const double process_cpu = over_processes(r, [](const auto& a) {
    return a.role == "pipeline_stage" ? a.process_cpu_seconds : 0.0;
  });
  auto s = split_of(r, actors, true);
  add_crossing(r, "pipeline_stage", s);
  s.cpu_beyond_compute = compute_cpu > 0 ? process_cpu / compute_cpu - 1 : -1;
  return s;
}

step_split split_of_data_parallel(const job_result& r) {
  std::vector<actor_time> actors;
  for (const auto& a : r.actors)
    if (a.role == "data_parallel_worker")
      actors.push_back({figure(a, "forward_seconds") + figure(a, "backward_seconds") +
                          figure(a, "step_seconds") + figure(a, "evaluate_seconds"),
                        figure(a, "exchange_wait_seconds")});
  auto s = split_of(r, actors, false);
  add_crossing(r, "data_parallel_worker", s);
  return s;
}

nlohmann::json core_split::to_json() const {
  if (used < 0)
    return nlohmann::json::object();
  nlohmann::json j = {{"cores_used", used},
                      {"cores_idle", std::max(0.0, 1 - used)},
                      {"serialisation", serialisation},
                      {"wire", wire},
                      {"busy", nlohmann::json::object()}};
  for (const auto& [actor, fraction] : busy)
    j["busy"][actor] = fraction;
  return j;
}

std::string core_split::text() const {
  if (used < 0)
    return "no figures: the run reported no CPU of its processes";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "cores used %.1f%% (idle %.1f%%), of them ser/copies %.1f%%, wire %.1f%%",
                100 * used, 100 * std::max(0.0, 1 - used), 100 * serialisation, 100 * wire);
  std::string out = buf;
  for (size_t i = 0; i < busy.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%s %.0f%%", i == 0 ? "; busy: " : ", ",
                  busy[i].first.c_str(), 100 * busy[i].second);
    out += buf;
  }
  return out;
}

core_split split_of_transfer(const job_result& r, int32_t cores) {
  core_split s;
  const double seconds = training_seconds(r);
  double cpu = 0;
  for (const auto& n : r.nodes)
    cpu += n.cpu_seconds;
  if (seconds <= 0 || cores <= 0 || cpu <= 0)
    return s;
  const double cores_time = cores * seconds;
  s.used = cpu / cores_time;
  const auto crossing = crossing_seconds(r);
  s.serialisation = crossing.serialisation / cores_time;
  s.wire = crossing.wire / cores_time;
  for (const auto& a : r.actors)
    if (a.role == "stage" || a.role == "head")
      s.busy.emplace_back(a.actor, a.busy_seconds / seconds);
  return s;
}

namespace {

/// The label column: `width`, or the header's title when wider.
int label_width(int width) {
  return std::max(width, 19);
}

} // namespace

std::string split_header(int width) {
  width = label_width(width);
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-*s %8s %8s %8s %9s %8s | %10s %6s", width,
                "where the step went", "compute", "waiting", "bubble", "imbalance", "overhead",
                "ser/copies", "wire");
  return buf;
}

std::string split_row(const std::string& label, int width, const step_split& s) {
  width = label_width(width);
  if (s.actors == 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-*s (no figures: its actors report no time split)", width,
                  label.c_str());
    return buf;
  }
  auto cell = [](double x, bool known, int w) {
    char buf[32];
    if (known)
      std::snprintf(buf, sizeof buf, "%*.1f%%", w - 1, 100 * x);
    else
      std::snprintf(buf, sizeof buf, "%*s", w, "-");
    return std::string{buf};
  };
  char buf[200];
  std::snprintf(buf, sizeof buf, "%-*s %s %s %s %s %s | %s %s", width, label.c_str(),
                cell(s.compute, true, 8).c_str(), cell(s.waiting, !s.stages, 8).c_str(),
                cell(s.bubble, s.stages, 8).c_str(), cell(s.imbalance, true, 9).c_str(),
                cell(s.overhead, true, 8).c_str(), cell(s.serialisation, true, 10).c_str(),
                cell(s.wire, true, 6).c_str());
  return buf;
}

const char* split_legend() {
  return "where the step went (fractions of the training time, mean over the stages or "
         "workers; they add up to 100%):\n"
         "  compute: forward, backward, optimizer step and the epochs' evaluations; compute "
         "minus `of limit`\n    is what the computations cost beyond the one-thread side's "
         "(smaller batches, shared caches)\n"
         "  waiting: a worker waiting for the gradient exchange (wire, copies, the other "
         "workers), beyond the imbalance\n"
         "  bubble: a stage idle while it had microbatches in flight (the schedule), beyond "
         "the imbalance\n"
         "  imbalance: the slowest stage's or worker's compute minus the mean (what the others "
         "wait for it)\n"
         "  overhead: the rest, neither computing nor waiting: the runtime's messages, "
         "serialisation, CAF,\n    the source, CPU taken from the compute threads\n"
         "  ser/copies, wire (right of the bar; CPU of other threads, counted in the columns "
         "before it as slower\n    compute, waiting or overhead): the CPU every process of the "
         "run spent serialising the messages\n    that crossed it (capnp, tensor bytes copied "
         "into and out of CAF's buffers or shared slabs) and\n    in the kernel's socket reads "
         "and writes, over the cores' time (the stages' or workers' lives);\n    0.0% when no "
         "message crosses a process (embedded)\n";
}

} // namespace bench
} // namespace baton::apps

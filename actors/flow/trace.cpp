#include "actors/flow/trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace flow {

// -- trace_recorder ----------------------------------------------------------------

trace_recorder::trace_recorder(bool enabled, size_t max_events)
  : enabled_(enabled),
    max_events_(max_events),
    to_system_(std::chrono::duration_cast<clock::duration>(
      std::chrono::system_clock::now().time_since_epoch() - clock::now().time_since_epoch())) {
  // nop
}

void trace_recorder::record(std::string kind, clock::time_point start, clock::time_point end,
                            int64_t microbatch_id, int64_t weight_version) {
  if (!enabled_)
    return;
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  messages::trace_event event;
  event.kind = std::move(kind);
  event.start_us = duration_cast<microseconds>(start.time_since_epoch() + to_system_).count();
  event.duration_us = std::max<int64_t>(0, duration_cast<microseconds>(end - start).count());
  event.microbatch_id = microbatch_id;
  event.weight_version = weight_version;
  events_.push_back(std::move(event));
}

std::vector<messages::trace_event> trace_recorder::take() {
  auto result = std::move(events_);
  events_.clear(); // a moved-from vector is only "valid"
  return result;
}

// -- Chrome trace ------------------------------------------------------------------

namespace {

/// One complete event and the row it goes to.
struct placed_event {
  const messages::trace_event* event;
  int64_t pid;
  int64_t tid;
};

nlohmann::json metadata(const char* name, int64_t pid, int64_t tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

} // namespace

nlohmann::json chrome_trace(const std::vector<messages::actor_report>& actors) {
  auto events = nlohmann::json::array();
  // Rows: a process per node, a thread per actor (tids are 1-based: some
  // viewers treat tid 0 specially).
  std::vector<std::string> nodes;
  std::vector<placed_event> placed;
  auto origin = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < actors.size(); ++i) {
    const auto& actor = actors[i];
    auto node = actor.node.empty() ? std::string{"unknown node"} : actor.node;
    auto known = std::find(nodes.begin(), nodes.end(), node);
    auto pid = static_cast<int64_t>(known - nodes.begin()) + 1;
    if (known == nodes.end()) {
      nodes.push_back(node);
      events.push_back(metadata("process_name", pid, 0, {{"name", node}}));
    }
    auto tid = static_cast<int64_t>(i) + 1;
    events.push_back(metadata("thread_name", pid, tid, {{"name", actor.actor}}));
    events.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    for (const auto& event : actor.trace) {
      placed.push_back({&event, pid, tid});
      origin = std::min(origin, event.start_us);
    }
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) {
    return a.event->start_us < b.event->start_us;
  });
  for (const auto& [event, pid, tid] : placed)
    events.push_back({{"name", event->kind},
                      {"ph", "X"},
                      {"ts", event->start_us - origin},
                      {"dur", std::max<int64_t>(0, event->duration_us)},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"microbatch", event->microbatch_id},
                                {"version", event->weight_version}}}});
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

caf::error write_chrome_trace(const std::string& path,
                              const std::vector<messages::actor_report>& actors) {
  std::string text;
  try {
    // Names and kinds come from peers: replace invalid UTF-8 rather than throw.
    text = chrome_trace(actors).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, "cannot build the trace for '" + path + "': " + e.what());
  }
  // All or nothing: a full disk keeps the previous file, no temporary file.
  if (auto why = model::try_replace_file(path, text + '\n'); !why.empty())
    return make_error(errc::bad_file, "--trace: " + why);
  return caf::none;
}

} // namespace flow
} // namespace baton::actors

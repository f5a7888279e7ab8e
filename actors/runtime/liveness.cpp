#include "actors/runtime/liveness.hpp"

#include <cstdio>

namespace baton::actors {
inline namespace runtime {

namespace {

/// "4.2 s": the time from `since` to `now`.
std::string seconds_text(liveness::clock_type::time_point since,
                         liveness::clock_type::time_point now) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(now - since).count());
  return text;
}

} // namespace

void liveness::start(clock_type::time_point now) {
  actors_.clear();
  started_ = now;
  advanced_ = now;
  asked_ = now;
}

void liveness::heard(const std::string& actor, const std::string& node, int64_t step,
                     int64_t work, const std::string& waiting, clock_type::time_point now) {
  auto [it, is_new] = actors_.try_emplace(actor);
  auto& a = it->second;
  if (is_new || step > a.step || work > a.work) {
    a.advanced = now;
    advanced_ = now;
  }
  a.step = step;
  a.work = work;
  a.waiting = waiting;
  a.heard = now;
  nodes_[node] = now;
}

void liveness::reported(const std::string& node, clock_type::time_point now) {
  advanced_ = now;
  nodes_[node] = now;
}

bool liveness::stalled(clock_type::duration limit, clock_type::time_point now) const {
  return now - advanced_ > limit;
}

int64_t liveness::step_of(const std::string& actor) const {
  auto it = actors_.find(actor);
  return it == actors_.end() ? -1 : it->second.step;
}

std::optional<liveness::clock_type::time_point>
liveness::last_heard_from(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end())
    return std::nullopt;
  return it->second;
}

void liveness::asking(clock_type::time_point now) {
  asked_ = now;
}

bool liveness::all_answered(const std::vector<live_actor>& actors) const {
  for (const auto& a : actors) {
    auto it = actors_.find(a.name);
    if (it == actors_.end() || it->second.heard < asked_)
      return false;
  }
  return true;
}

/// "stage1 on n2 at step 12 (advanced 4.1 s ago): waiting for credits from
/// stage2 (2 in flight)", or "...: no answer to a heartbeat request (busy in
/// one computation, or hung; last heard 4.1 s ago)".
std::string liveness::describe(const live_actor& a, clock_type::time_point now) const {
  std::string text = a.name;
  if (!a.node.empty() && a.node != "embedded")
    text += " on " + a.node;
  auto it = actors_.find(a.name);
  if (it == actors_.end())
    return text + ": no heartbeat since the pass began " + seconds_text(started_, now) +
           " ago (busy in one computation, or hung)";
  const auto& s = it->second;
  if (s.step >= 0)
    text += " at step " + std::to_string(s.step);
  text += " (advanced " + seconds_text(s.advanced, now) + " ago)";
  if (s.heard < asked_)
    return text + ": no answer to a heartbeat request (busy in one computation, or hung; last "
                  "heard " + seconds_text(s.heard, now) + " ago)";
  return text + ": waiting for " + (s.waiting.empty() ? std::string{"a message"} : s.waiting);
}

std::string liveness::stall_report(const std::vector<live_actor>& actors,
                                   clock_type::duration limit, clock_type::time_point now) const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
  std::string text = "no actor advanced (made a step or a piece of work) for " +
                     std::to_string(ms) + " ms (runtime.stall_timeout_ms): a message was lost or "
                     "an actor hangs; stopped advancing:";
  for (size_t i = 0; i < actors.size(); ++i)
    text += (i == 0 ? " " : "; ") + describe(actors[i], now);
  return text;
}

std::optional<std::string>
short_stall_timeout_warning(std::chrono::steady_clock::duration limit,
                            std::chrono::steady_clock::duration heartbeat) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  if (limit >= 3 * heartbeat)
    return std::nullopt;
  auto every = duration_cast<milliseconds>(heartbeat).count();
  auto ms = duration_cast<milliseconds>(limit).count();
  return "runtime.stall_timeout_ms is " + std::to_string(ms) +
         " ms: actors send a heartbeat every " + std::to_string(every) +
         " ms while they work, so a timeout under " + std::to_string(3 * every) +
         " ms may take a healthy run for a stalled one";
}

} // namespace runtime
} // namespace baton::actors

#include "actors/flow/activity.hpp"

#include <ctime>

#include <ATen/Parallel.h>
#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/flow/interfaces.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace flow {

namespace {

double seconds_of(const timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double cpu_clock_seconds(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return seconds_of(t);
}

} // namespace

double thread_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

double process_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

void use_thread_budget(int32_t threads) {
  thread_local int32_t current = 0;
  if (current != threads) {
    at::set_num_threads(threads);
    current = threads;
  }
}

messages::actor_report activity_report(std::string actor, std::string role, std::string node,
                                       const activity& work) {
  messages::actor_report r;
  r.actor = std::move(actor);
  r.role = std::move(role);
  r.node = std::move(node);
  r.busy_seconds = work.busy_seconds();
  r.idle_seconds = work.idle_seconds();
  r.compute_cpu_seconds = work.compute_cpu_seconds();
  r.process_cpu_seconds = work.process_cpu_seconds_since_begin();
  return r;
}

caf::actor sender_of(caf::local_actor* self) {
  return caf::actor_cast<caf::actor>(self->current_sender());
}

const at::Tensor* task_labels_of(const messages::microbatch& m, const std::string& task) {
  for (const auto& l : m.labels)
    if (l.task == task)
      return &l.values;
  return nullptr;
}

void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const std::string& what) {
  spdlog::error("{}: {}", actor, what);
  // Sent as `self`: the coordinator tells this actor from an earlier
  // incarnation of the same name (after a restart) by its address.
  if (coordinator)
    caf::send_as(caf::actor_cast<caf::actor>(self), coordinator, failure_atom::value, actor,
                 static_cast<uint8_t>(errc::actor_failed), what);
  if (auto* ev = dynamic_cast<caf::event_based_actor*>(self))
    ev->quit(make_error(errc::actor_failed, actor + ": " + what));
}

void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const caf::error& cause) {
  // The run fails with the cause's code (a baton error; anything else is
  // actor_failed), which the coordinator names: its text is the context
  // only. This actor's log line names a cause of another kind
  // (compute_failed, bad_file) itself.
  bool ours = cause.category() == error_category_atom;
  auto code = ours ? cause.code() : static_cast<uint8_t>(errc::actor_failed);
  spdlog::error("{}: {}", actor, cause == errc::actor_failed ? context_of(cause) : describe(cause));
  if (coordinator)
    caf::send_as(caf::actor_cast<caf::actor>(self), coordinator, failure_atom::value, actor,
                 code, ours ? context_of(cause) : describe(cause));
  if (auto* ev = dynamic_cast<caf::event_based_actor*>(self))
    ev->quit(ours
               ? make_error(static_cast<errc>(cause.code()), actor + ": " + context_of(cause))
               : cause);
}

} // namespace flow
} // namespace baton::actors

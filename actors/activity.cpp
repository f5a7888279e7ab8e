#include "actors/activity.hpp"

#include <ATen/Parallel.h>
#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/interfaces.hpp"
#include "messages/errc.hpp"

namespace baton::actors {

void use_thread_budget(int32_t threads) {
  thread_local int32_t current = 0;
  if (current != threads) {
    at::set_num_threads(threads);
    current = threads;
  }
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
    caf::send_as(caf::actor_cast<caf::actor>(self), coordinator, failure_atom::value, actor, what);
  if (auto* ev = dynamic_cast<caf::event_based_actor*>(self))
    ev->quit(make_error(errc::actor_failed, actor + ": " + what));
}

} // namespace baton::actors

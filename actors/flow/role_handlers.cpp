#include "actors/flow/role_handlers.hpp"

#include <caf/actor_cast.hpp>

namespace baton::actors {
inline namespace flow {

caf::actor sender_of(caf::local_actor* self) {
  return caf::actor_cast<caf::actor>(self->current_sender());
}

} // namespace flow
} // namespace baton::actors

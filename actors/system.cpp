#include "actors/system.hpp"

#include <caf/io/middleman.hpp>
#include <caf/timespan.hpp>

#include "messages/type_ids.hpp"

namespace baton::actors {

void configure(caf::actor_system_config& cfg, const system_settings& s) {
  messages::register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", static_cast<size_t>(s.scheduler_threads));
  cfg.set("middleman.heartbeat-interval", caf::timespan{s.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{s.connection_timeout});
  // Stages on one node talk to heads on another directly, not through the
  // coordinator's process.
  cfg.set("middleman.enable-automatic-connections", true);
}

} // namespace baton::actors

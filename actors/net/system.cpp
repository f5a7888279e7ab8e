#include "actors/net/system.hpp"

#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/timespan.hpp>

#include "messages/type_ids.hpp"

namespace baton::actors {
inline namespace net {

namespace {

void configure_tls(caf::actor_system_config& cfg, const tls_settings& tls) {
  cfg.load<caf::openssl::manager>(); // after the middleman, as caf_openssl requires
  // Setting any of these turns on peer verification on both ends.
  cfg.openssl_certificate = tls.certificate;
  cfg.openssl_key = tls.key;
  cfg.openssl_cafile = tls.ca;
  // Nodes reach each other through the coordinator's TLS connections (the
  // direct ones of job_nodes::connect_peers are plain TCP).
}

} // namespace

void configure(caf::actor_system_config& cfg, const system_settings& s) {
  messages::register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", static_cast<size_t>(s.scheduler_threads));
  // Compute runs in detached actors: the scheduler only routes messages.
  // Work stealing polls for work between messages (spins, then sleeps 50 us
  // at a time); on 2 cores those wake-ups took CPU from the stages: the
  // sharing policy waits on a condition variable instead. Measured on 8,192
  // convnet samples, 1f1b over 2 node processes: 507 to 674 samples/s, and
  // the nodes' CPU seconds fell by a quarter.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("middleman.heartbeat-interval", caf::timespan{s.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{s.connection_timeout});
  // Nodes talk to each other directly over the connections the coordinator
  // has them open before any actor exists (job_nodes::connect_peers), never
  // over CAF 0.17's automatic connections, which two nodes may open at once
  // and then lose messages on.
  cfg.set("middleman.enable-automatic-connections", false);
  // A message from another node is deserialised by the thread that read it
  // (the multiplexer's) and put in its actor's mailbox there. CAF 0.17's
  // default hands it to a BASP worker on the scheduler first: one more
  // thread to wake between the socket and a compute thread, on 2 cores
  // often behind a busy one. Measured (2026-12-04, interleaved pairs, one
  // binary): the digits' 2-stage gpipe on 2 node processes 5.02-5.21 ->
  // 4.56-4.80 ms a step (embedded: 3.75), `baton bench pipeline --quick
  // --model convnet` 1f1b 1,738-2,028 -> 2,019-2,105 samples/s; the mlp's
  // ring and ps of 76 MB a step unchanged within the host's noise.
  cfg.set("middleman.workers", size_t{0});
  if (s.tls.enabled())
    configure_tls(cfg, s.tls);
}

} // namespace net
} // namespace baton::actors

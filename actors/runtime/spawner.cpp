#include "actors/runtime/spawner.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/yaml_field.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/roles/injected_faults.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {
inline namespace runtime {

caf::expected<caf::actor> spawn_role(caf::actor_system& sys, const std::string& node,
                                     const messages::spawn_request& req,
                                     const std::vector<role_type>& roles,
                                     const path_roots& roots) {
  if (req.invalid)
    return make_error(errc::malformed_message, "spawn request: " + describe(req.invalid));
  if (const auto* role = find_role(roles, req.role))
    return role->spawn(sys, spawn_args{req.name, node, req.spec, roots});
  std::string known;
  for (const auto& r : roles)
    known += (known.empty() ? "" : ", ") + r.name;
  return make_error(errc::unknown_actor_type, "node " + node + " has no actor type '" + req.role +
                                                "' (registered: " + known + ")");
}

namespace {

/// This process's peak resident memory: VmHWM of /proc/self/status, which
/// belongs to the process's own memory map. getrusage's ru_maxrss is kept
/// across fork and exec: a node started by `baton compare` reported the
/// parent's peak (275 MiB for every run), not its own. ru_maxrss only where
/// /proc is missing.
int64_t peak_rss_bytes(const rusage& usage) {
  std::ifstream status{"/proc/self/status"};
  std::string key;
  int64_t kib = 0;
  while (status >> key)
    if (key == "VmHWM:" && status >> kib)
      return kib * 1024;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux: KiB
}

} // namespace

messages::node_report current_node_report(const std::string& node) {
  messages::node_report r;
  r.name = node;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  r.peak_rss_bytes = peak_rss_bytes(usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  r.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  r.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  r.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return r;
}

caf::behavior pulse_behavior(caf::event_based_actor* self) {
  const auto answer = [self] {
    if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
      self->send(sender, pulse_atom::value);
  };
  return {
    [=](pulse_atom) { answer(); },
    [=](pulse_atom, const messages::tensor_set&) { answer(); },
  };
}

namespace {

/// A spawner's state: its node, its policy and who proved their identity.
struct spawner_state {
  std::string node;
  spawner_policy policy;
  caf::actor pulse; ///< the liveness probe (pulse_behavior), linked
  std::map<caf::node_id, std::string> nonces; ///< the open challenge of each peer process
  std::set<caf::node_id> authenticated;       ///< peer processes that passed the proof
  static inline const char* name = "spawner";

  /// Whether `sender` may have actors spawned and read the node report:
  /// anyone without TLS; with TLS this process and authenticated peers.
  bool may_serve(const caf::strong_actor_ptr& sender, const caf::node_id& here) const {
    if (!policy.tls.enabled())
      return true;
    return sender != nullptr && (sender->node() == here || authenticated.count(sender->node()));
  }

  /// Steps 1-2 of the proof (actors/net/tls.hpp): signs the peer's nonce and
  /// issues one for `peer`, replacing an older open challenge.
  caf::expected<std::pair<std::string, identity_proof>> challenge(const caf::node_id& peer,
                                                                  const std::string& nonce) {
    if (!policy.tls.enabled())
      return make_error(errc::bad_config, "node " + node + " does not use TLS");
    if (nonce.size() > 256)
      return make_error(errc::malformed_message, "identity proof: nonce too long");
    auto proof = prove_identity(policy.tls, "node", nonce);
    if (!proof)
      return proof.error();
    return std::make_pair(nonces[peer] = make_nonce(), std::move(*proof));
  }

  /// Steps 3-4: checks the peer's proof against its open challenge, the CA
  /// and tls.allow; returns the certificate's names.
  caf::expected<std::vector<std::string>> authenticate(const caf::node_id& peer,
                                                       const identity_proof& proof) {
    auto open = nonces.find(peer);
    if (!policy.tls.enabled() || open == nonces.end())
      return make_error(errc::malformed_message, "identity proof without a challenge");
    auto nonce = std::move(open->second);
    nonces.erase(open); // one attempt per challenge
    auto names = check_proof(policy.tls.ca, proof, "client", nonce);
    if (!names)
      return names.error();
    if (!allowed(*names))
      return make_error(errc::bad_config, "node " + node + " does not accept the certificate for " +
                                            describe_names(*names) + ": not in its tls.allow (" +
                                            detail::join(policy.allow) + ")");
    authenticated.insert(peer);
    return names;
  }

  bool allowed(const std::vector<std::string>& names) const {
    if (policy.allow.empty())
      return true;
    for (const auto& name : names)
      if (std::find(policy.allow.begin(), policy.allow.end(), name) != policy.allow.end())
        return true;
    return false;
  }
};

using spawner_actor = caf::stateful_actor<spawner_state>;

caf::error refuse_unauthenticated(spawner_actor* self, const std::string& what) {
  auto err = make_error(errc::bad_config,
                        "node " + self->state.node + " refused " + what + ": the sender has not "
                        "proven its identity (TLS identity proof, see actors/net/tls.hpp)");
  spdlog::warn("{}", describe(err));
  return err;
}

caf::result<caf::actor> serve_spawn(spawner_actor* self, const messages::spawn_request& req) {
  auto& state = self->state;
  if (!state.may_serve(self->current_sender(), self->node()))
    return refuse_unauthenticated(self, "to spawn " + req.role + " '" + req.name + "'");
  auto started =
    spawn_role(self->system(), state.node, req, state.policy.roles, state.policy.roots);
  if (!started) {
    spdlog::warn("node {}: refused to spawn {} '{}': {}", state.node, req.role, req.name,
                 describe(started.error()));
    return started.error();
  }
  self->link_to(*started);
  spdlog::info("node {}: spawned {} '{}'", state.node, req.role, req.name);
  return *started;
}

caf::result<std::string, std::string, std::string> serve_challenge(spawner_actor* self,
                                                                   const std::string& nonce) {
  auto sender = self->current_sender();
  if (sender == nullptr)
    return make_error(errc::malformed_message, "identity proof from an anonymous sender");
  auto answer = self->state.challenge(sender->node(), nonce);
  if (!answer)
    return answer.error();
  auto& [ours, proof] = *answer;
  return {ours, proof.certificate_pem, proof.signature};
}

caf::result<caf::ok_atom> serve_proof(spawner_actor* self, identity_proof proof) {
  auto sender = self->current_sender();
  if (sender == nullptr)
    return make_error(errc::malformed_message, "identity proof from an anonymous sender");
  auto names = self->state.authenticate(sender->node(), proof);
  if (!names) {
    spdlog::warn("node {}: refused a peer's identity: {}", self->state.node,
                 describe(names.error()));
    return names.error();
  }
  spdlog::info("node {}: peer authenticated as {}", self->state.node, describe_names(*names));
  return caf::ok_atom::value;
}

/// Opens this node's direct connection to the peer node at host:port (the
/// coordinator asks one node of every pair: job_nodes::connect_peers).
caf::result<caf::ok_atom> serve_peer_connection(spawner_actor* self, const std::string& host,
                                                uint16_t port) {
  if (!self->state.may_serve(self->current_sender(), self->node()))
    return refuse_unauthenticated(self, "to connect to a peer node");
  auto peer = remote_actor_framed(self->system(), host, port);
  if (!peer)
    return make_error(errc::node_unreachable,
                      self->state.node + ": cannot reach the peer node at " + host + ":" +
                        std::to_string(port) + ": " + self->system().render(peer.error()));
  spdlog::info("node {}: connected directly to the node at {}:{}", self->state.node, host, port);
  return caf::ok_atom::value;
}

caf::behavior spawner_behavior(spawner_actor* self, std::string node, spawner_policy policy) {
  self->state.node = std::move(node);
  self->state.policy = std::move(policy);
  // Hidden: a node's shutdown does not wait for it; linked: it ends with the spawner.
  self->state.pulse = self->spawn<caf::hidden + caf::linked>(pulse_behavior);
  // Children that end (normally or not) must not take the spawner down.
  self->set_exit_handler([=](const caf::exit_msg& msg) {
    if (msg.source == nullptr || msg.reason == caf::exit_reason::kill)
      self->quit(msg.reason);
  });
  return {
    [=](const messages::spawn_request& req) { return serve_spawn(self, req); },
    [=](caf::get_atom, node_atom) -> caf::result<messages::node_report> {
      if (!self->state.may_serve(self->current_sender(), self->node()))
        return refuse_unauthenticated(self, "its node report");
      return current_node_report(self->state.node);
    },
    [=](caf::get_atom, pulse_atom) -> caf::result<caf::actor> {
      if (!self->state.may_serve(self->current_sender(), self->node()))
        return refuse_unauthenticated(self, "its pulse");
      return self->state.pulse;
    },
    [=](fault_atom, const std::string& kind, int32_t ms) -> caf::result<void> {
      if (!self->state.may_serve(self->current_sender(), self->node()))
        return refuse_unauthenticated(self, "to inject a fault");
      spdlog::warn("node {}: injected fault: {} this process{}", self->state.node, kind,
                   kind == "stop" ? " for " + std::to_string(ms) + " ms" : std::string{});
      if (auto err = inject_process_fault(kind, ms))
        return err;
      return caf::unit;
    },
    [=](connect_atom, const std::string& host, uint16_t port) {
      return serve_peer_connection(self, host, port);
    },
    [=](auth_atom, const std::string& nonce) { return serve_challenge(self, nonce); },
    [=](auth_atom, std::string& certificate_pem, std::string& signature) {
      return serve_proof(self, {std::move(certificate_pem), std::move(signature)});
    },
  };
}

} // namespace

caf::actor spawn_spawner(caf::actor_system& sys, const std::string& node, spawner_policy policy) {
  return sys.spawn<caf::detached>(spawner_behavior, node, std::move(policy));
}

} // namespace runtime
} // namespace baton::actors

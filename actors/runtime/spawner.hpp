#pragma once

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/net/tls.hpp"
#include "messages/types.hpp"

namespace baton::actors {

/// The actor types a node may start. A spawn_request naming anything else
/// is refused with errc::unknown_actor_type.
const std::vector<std::string>& registered_roles();

/// Where a node lets spawned actors read files (node.yaml `data_dirs`,
/// `checkpoint_dir`). Roots are compared after std::filesystem's
/// weakly_canonical (symlinks and `..` resolved); an empty list or string
/// leaves that kind of file unrestricted.
struct path_roots {
  std::vector<std::string> data_dirs; ///< dataset directories (source data_dir)
  std::string checkpoint_dir;         ///< checkpoints and TorchScript files
};

struct source_spec;
struct stage_spec;
struct head_role_spec;
struct pipeline_stage_spec;

/// Refuses (errc::bad_file) a spec that reads a file outside its roots: a
/// source's dataset directory (not for the synthetic data set) against
/// data_dirs; a stage's checkpoint, the checkpoint directory a trainable
/// actor writes and restores (runtime.checkpoint_dir) and any TorchScript
/// model file against checkpoint_dir. The error names the path, its resolved
/// form and the roots.
caf::error check_paths(const source_spec& spec, const path_roots& roots);
caf::error check_paths(const stage_spec& spec, const path_roots& roots);
caf::error check_paths(const head_role_spec& spec, const path_roots& roots);
caf::error check_paths(const pipeline_stage_spec& spec, const path_roots& roots);

/// Parses `req.spec` for `req.role`, checks its files against `roots` and
/// starts the actor on this process. Nothing is started on any error.
caf::expected<caf::actor> spawn_role(caf::actor_system& sys, const std::string& node,
                                     const messages::spawn_request& req,
                                     const path_roots& roots = {});

/// This process's resources and usage (peak RSS, CPU time, cores, memory).
messages::node_report current_node_report(const std::string& node);

/// What a node's spawner enforces.
struct spawner_policy {
  path_roots roots;
  /// The node's TLS identity. When enabled, the spawner answers the identity
  /// proof of actors/net/tls.hpp (auth_atom) and serves spawn requests and node
  /// reports only to peer processes that completed it (and to this process).
  tls_settings tls;
  /// Names (CN or subjectAltName DNS) a peer's certificate must carry, one
  /// of them (node.yaml `tls.allow`); empty: any certificate of the CA.
  std::vector<std::string> allow;
};

/// Spawns the spawner of node `node`: answers spawn_request with the new
/// actor and (get_atom, node_atom) with a node_report; with TLS also the
/// identity proof ((auth_atom, nonce) and (auth_atom, certificate, signature)).
/// It is detached because spawning loads datasets and checkpoints. Every
/// actor it starts is linked to it: killing the spawner (node shutdown) kills
/// them too.
caf::actor spawn_spawner(caf::actor_system& sys, const std::string& node,
                         spawner_policy policy = {});

} // namespace baton::actors

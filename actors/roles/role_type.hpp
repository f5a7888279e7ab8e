#pragma once

// What a node can spawn: a table of roles, handed to the node's spawner by
// the caller (the modes' registry, actors/modes/registry.hpp). A spawn
// request naming a role outside the table is refused; a role's factory
// parses its settings, checks the files they name against the node's roots,
// and spawns, or starts nothing.

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

namespace baton::actors {
inline namespace roles {

/// Where a node lets spawned actors read files (node.yaml `data_dirs`,
/// `checkpoint_dir`). Roots are compared after std::filesystem's
/// weakly_canonical (symlinks and `..` resolved); an empty list or string
/// leaves that kind of file unrestricted.
struct path_roots {
  std::vector<std::string> data_dirs; ///< dataset directories (source data_dir)
  std::string checkpoint_dir;         ///< checkpoints and TorchScript files
};

/// Refuses (errc::bad_file) `path` unless it lies in one of `roots`; `what`
/// names the file ("dataset directory"), `key` the roots in node.yaml. The
/// error names the path, its resolved form and the roots. An empty path or
/// no roots: no restriction.
caf::error check_path(const std::string& path, const std::string& what,
                      const std::vector<std::string>& roots, const std::string& key);

/// check_path against the node's checkpoint_dir (checkpoints, checkpoint
/// directories and TorchScript files).
caf::error check_checkpoint_path(const std::string& path, const std::string& what,
                                 const path_roots& roots);

/// One spawn on a node: what the coordinator asked for.
struct spawn_args {
  const std::string& name;     ///< the actor's name in the job
  const std::string& node;     ///< the node's name
  const std::string& settings; ///< the role's settings (YAML text, with `run:`)
  const path_roots& roots;     ///< where the node lets it read files
};

/// A role a node may spawn: its name in spawn requests and its factory.
struct role_type {
  std::string name;
  caf::expected<caf::actor> (*spawn)(caf::actor_system& sys, const spawn_args& args);
  /// Its actors compute the forward and backward (workers, stages, heads),
  /// so their busy and idle time is the run's time split (compare, report);
  /// sources and shards move or store tensors.
  bool trains = false;
};

/// A role's factory from its parts: parses `args.settings` with `parse`,
/// checks the files they name with `check`, then spawns with `spawn`; starts
/// nothing when a part fails.
template <class Spec>
caf::expected<caf::actor>
parse_check_spawn(caf::actor_system& sys, const spawn_args& args,
                  caf::expected<Spec> (*parse)(const std::string&),
                  caf::error (*check)(const Spec&, const path_roots&),
                  caf::expected<caf::actor> (*spawn)(caf::actor_system&, const std::string&,
                                                     const std::string&, const Spec&)) {
  auto spec = parse(args.settings);
  if (!spec)
    return spec.error();
  if (auto err = check(*spec, args.roots))
    return err;
  return spawn(sys, args.name, args.node, *spec);
}

/// The role named `name` in `roles`, or nullptr.
const role_type* find_role(const std::vector<role_type>& roles, const std::string& name);

} // namespace roles
} // namespace baton::actors

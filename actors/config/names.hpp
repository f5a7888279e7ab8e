#pragma once

// The one rule for every name a user gives (a task, a head, a node; in a
// topology, a node.yaml, `--set` or `baton node --name`). A name becomes an
// actor's name, a node's name and a directory (an actor's checkpoints are in
// CHECKPOINT_DIR/NAME), so it must be one path component that cannot climb
// out of its directory or alias another name: `all10` and `./all10` once
// shared one directory, and `../../evil` wrote above the checkpoint
// directory. Plain strings, no YAML: the topology parser, the node and the
// command line share it.

#include <cstddef>
#include <string>

namespace baton::actors {
inline namespace config {

/// The longest name, in bytes: names appear in logs, file names and lists in
/// error messages.
inline constexpr size_t max_name_bytes = 64;

/// The rule as error messages state it: "a non-empty name of at most 64
/// letters, digits, '.', '_' or '-', not starting with '.' or '-'".
const std::string& name_rule();

/// Why `name` breaks the rule ("it contains '/'", "it is empty", "it starts
/// with '.'", "it is 65 bytes long"), or "" when it is a valid name.
///
/// Letters and digits are ASCII only: every byte of a valid name is one of
/// [A-Za-z0-9_.-], so a name is one path component on every file system, and
/// `.`, `..` and hidden files are excluded by the first character.
std::string check_name(const std::string& name);

/// Whether baton gives `name` (ignoring case) to something of its own that
/// shares the namespace of user names: an actor (`source`, `stage0`,
/// `stage1.0`, `worker.3`, `shard.0`), a result group (`workers`) or a node
/// report (`coordinator`, `embedded`). Reserved are `source`, `coordinator`,
/// `embedded`, `workers`, and `stage`, `worker` or `shard` followed by a
/// number, with or without a dot, and an optional `.R` (a replica), in every
/// mode: a mode's stage count may change at run time (`split: auto`).
bool reserved_name(const std::string& name);

/// The reserved names as errors list them: "source, coordinator, embedded,
/// workers, stageN, stageN.R, worker.N, shard.N".
const std::string& reserved_names();

/// Whether `name` (ignoring case) is the name of one of the files baton
/// keeps in a checkpoint directory, beside the directories named after the
/// trainable actors (an actor `run.lock` could not make its directory
/// there, and a run failed at its first checkpoint): `run.lock`, `run.yaml`
/// and their temporary files, any name starting with `run.lock.` or
/// `run.yaml.`.
bool reserved_file_name(const std::string& name);

/// The reserved file names as errors list them: "run.lock, run.yaml, and
/// names starting with 'run.lock.' or 'run.yaml.'".
const std::string& reserved_file_names();

/// How names compare for uniqueness: ASCII lower case, so that `All10` and
/// `all10` are the same name (they would share one directory on a
/// case-insensitive file system, a checkpoint directory copied to a Mac).
std::string name_key(const std::string& name);

} // namespace config
} // namespace baton::actors

#pragma once

// The ways `baton compare` and `baton predict` run a mode: each a row of
// their catalogue, registered with its mode (mode::variants), so that a new
// strategy is one registry entry and the catalogue follows.

#include <cstdint>
#include <string>
#include <vector>

namespace baton::actors {
inline namespace modes {

/// One way to run a mode on a workload file (`baton compare --strategies`).
struct strategy_variant {
  std::string name;    ///< "data-parallel:ring", as --strategies takes it
  std::string summary; ///< one line for help and the report
  /// KEY=VALUE, as `baton run --set`; "{W}" stands for the cluster's hosts.
  std::vector<std::string> overrides = {};
  /// YAML map merged into the mode's section where the workload leaves the
  /// keys out ("{sync_every: 8}"); "" for none.
  std::string defaults = "";
  /// Keys of the mode's section that choose the variant (exchange, freeze,
  /// ...): the workload's are dropped and the overrides or defaults set
  /// them, unless the variant keeps them (`keeps`).
  std::vector<std::string> keeps = {};
  /// `--mode local`: one process, not over --local-nodes and --link.
  bool local = false;
  /// W workers take G / W each of the global batch G (data-parallel, IST);
  /// false: one minibatch is the global batch (pipeline).
  bool splits_batch = false;
  /// Microbatches per optimiser step: above 1, the workload's when it has
  /// more than 1, else this many (gpipe's flush needs several).
  int32_t microbatches = 1;
};

} // namespace modes
} // namespace baton::actors

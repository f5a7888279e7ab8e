#pragma once

// The strategies `baton compare` and `baton predict` choose from: a name
// (`data-parallel:ring`) and the `--set` overrides that turn a workload file
// into a run of it. Whether one applies to a workload is the topology
// parser's answer (its refusal is the reason shown).
//
// A workload file (docs/comparing.md#the-workload-file) is a topology
// file whose `job:` is ignored; it may hold the strategies' sections
// (`data_parallel:`, `ist:`, `pipeline:`) with their settings: each run
// keeps only its own strategy's section (derive_topology). `data.batch_size`
// is the GLOBAL batch G, the samples of one optimiser step of every
// strategy: data-parallel and IST workers take G / W each.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace baton::apps {

/// One strategy of a comparison.
struct strategy_choice {
  std::string name;                   ///< as given to --strategies
  std::string summary;                ///< one line for help and the report
  std::string job;                    ///< `job:` of its runs
  std::string section;                ///< the topology section it reads ("" none)
  std::vector<std::string> overrides = {}; ///< KEY=VALUE, as `baton run --set`
  std::vector<std::string> flags = {};     ///< more `baton run` flags (local: --mode local)
  bool distributed = true;            ///< runs over --local-nodes and --link
  /// Workers that split the global batch (data-parallel, IST, local: W;
  /// pipeline: 1, its minibatch is the global batch).
  int32_t batch_split = 1;
  int32_t microbatches_per_step = 1;  ///< pipeline microbatches per optimiser step
  /// Keys of its section kept from the workload, and a YAML map of what it
  /// sets where the workload says nothing (strategy_variant).
  std::vector<std::string> keeps = {};
  std::string defaults = "";
};

/// Every strategy known, in the order of the default --strategies, with
/// their overrides for a cluster of `hosts` nodes (W = hosts for
/// data-parallel and IST; pipeline's stages are the planner's): every
/// mode's variants (actors/modes/registry.cpp), in the registry's order.
std::vector<strategy_choice> all_strategies(int32_t hosts);

/// The strategies named by a --strategies list ("a,b,c"); an unknown name
/// is an error (exit 2) naming the known ones, with a did-you-mean.
caf::expected<std::vector<strategy_choice>> choose_strategies(const std::string& list,
                                                              int32_t hosts);

/// The topology text `s` runs: the workload's `text` (its file read once
/// for every strategy, actors::read_topology_file) with `job:` set to
/// s.job, without the sections of other strategies (transfer's backbone
/// keys too), relative paths made absolute against `file`'s directory (the
/// text is written elsewhere); an error when the text is not YAML (`file`
/// names it). `user`: the user's `--set`s, which the runs get too (one that
/// gives `optimizer:` keeps the pre-training's optimizer out of the
/// strategy's section).
caf::expected<std::string> derive_topology(const strategy_choice& s, const std::string& text,
                                           const std::string& file,
                                           const std::vector<std::string>& user);

/// The overrides of a run of `s`: its own, the user's (but those of another
/// strategy's section, which the file `s` runs does not have: `--set
/// data_parallel.model=mlp` is for the strategies that read
/// `data_parallel:`), then the batch per
/// worker (G / W) from the global batch G (the user's data.batch_size, else
/// the derived text's, else 64) and gpipe's microbatches (the workload's
/// when more than 1, else 4: s.microbatches_per_step is set to them).
/// `derived`: derive_topology's text (`file` names it in errors); an error
/// when G is not a multiple of W.
caf::expected<std::vector<std::string>> run_overrides(strategy_choice& s,
                                                      const std::string& derived,
                                                      const std::string& file,
                                                      const std::vector<std::string>& user);

/// The model the run of `s` would train ("convnet", "ist_mlp" for IST's
/// mlp), when it applies to the workload: the topology parser's refusal and
/// the plan's (actors/modes/registry.hpp) otherwise. `path`: the derived
/// topology file; `overrides`: run_overrides' (the user's included).
caf::expected<std::string> applies(const strategy_choice& s, const std::string& path,
                                   const std::vector<std::string>& overrides, int32_t hosts);

} // namespace baton::apps

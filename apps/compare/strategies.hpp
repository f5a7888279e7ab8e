#pragma once

// The strategies `baton compare` and `baton predict` choose from: a name
// (`data-parallel:ring`) and the `--set` overrides that turn a workload file
// into a run of it. Whether one applies to a workload is the topology
// parser's answer (its refusal is the reason shown).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace baton::apps {

/// One strategy of a comparison.
struct strategy_choice {
  std::string name;                   ///< as given to --strategies
  std::string summary;                ///< one line for help and the report
  std::vector<std::string> overrides; ///< KEY=VALUE, as `baton run --set`
};

/// Every strategy known, in the order of the default --strategies, with
/// their overrides for a cluster of `hosts` nodes (W = hosts for
/// data-parallel and IST; pipeline's stages are the planner's).
std::vector<strategy_choice> all_strategies(int32_t hosts);

/// The strategies named by a --strategies list ("a,b,c"); an unknown name
/// is an error (exit 2) naming the known ones, with a did-you-mean.
caf::expected<std::vector<strategy_choice>> choose_strategies(const std::string& list,
                                                              int32_t hosts);

/// Whether `s` applies to the workload `file` (with the user's `overrides`
/// first): the topology parser's refusal when it does not.
caf::expected<void> applies(const strategy_choice& s, const std::string& file,
                            const std::vector<std::string>& overrides);

} // namespace baton::apps

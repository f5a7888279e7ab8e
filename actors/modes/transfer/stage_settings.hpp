#pragma once

// The settings of a frozen transfer stage (role `stage`), listed once for
// both directions of their YAML (inspect, actors/config/yaml_codec.hpp).

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// cache, cache_mb, block_rows; a cache computes canonical blocks of at
/// least one row.
template <class Inspector>
void inspect(Inspector& f, feature_cache_spec& x) {
  f.field("cache", x.cache);
  f.field("cache_mb", x.cache_mb).at_least(0.0);
  f.field("block_rows", x.block_rows).at_least(0);
  f.expect("block_rows", !x.cache || x.block_rows >= 1, "at least 1 with a cache");
}

} // namespace baton::model

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// A frozen stage: layers [begin, end) of the backbone.
struct stage_settings {
  model::model_spec backbone;
  std::string checkpoint; ///< whole-backbone checkpoint; empty = initial weights
  int64_t begin = 0;
  int64_t end = 0;
  int32_t window = 4;
  int32_t threads = 1;    ///< torch threads of this actor
  /// How it computes and keeps its features (`backbone.cache`, `cache_mb`,
  /// `feature_block`); a cache only in a stage that holds the whole backbone.
  model::feature_cache_spec features;
};

/// Its fields; 0 <= begin < end, and a cache only from layer 0.
template <class Inspector>
void inspect(Inspector& f, stage_settings& x) {
  f.field("backbone", x.backbone);
  f.field("checkpoint", x.checkpoint);
  f.field("begin", x.begin).at_least(0);
  f.field("end", x.end);
  f.expect("end", x.end > x.begin, "greater than begin");
  f.field("window", x.window).at_least(1);
  f.field("threads", x.threads).at_least(1);
  f.field("features", x.features);
  f.expect("begin", !x.features.cache || x.begin == 0,
           "0 with a cache (only the stage that holds the whole backbone caches)");
  // The runtime's `run:` (with_run, at every spawn): a frozen stage restores,
  // checkpoints and records nothing.
  f.optional_field("run", [] { return run_settings{}; }, [](const run_settings&) {});
}

/// A stage's settings as YAML.
std::string to_yaml(const stage_settings& x);
/// Parses to_yaml's text of a stage strictly: errc::bad_config on anything else.
caf::expected<stage_settings> parse_stage_settings(const std::string& yaml);

} // namespace transfer
} // namespace modes
} // namespace baton::actors

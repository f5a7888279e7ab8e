#pragma once

// The profiles and timings the modes' costs ask for (actors/modes/
// costing.hpp: cost_profiles), taken once per model, batch and threads and
// kept: a comparison profiles its mlp once per thread count, not per
// strategy, and takes each again in each of its rounds. docs/cost-model.md.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/modes/costing.hpp"
#include "model/planning/profiler.hpp"

namespace baton::apps {

/// Profiles (model::profile_model, as `baton profile`) the model each
/// strategy trains, once per model, batch and torch threads. A `baton
/// profile` file given with --profile serves every strategy that trains its
/// model.
class profile_cache : public actors::cost_profiles {
public:
  /// `given`: the profile of a `baton profile` file (actors::load_profile),
  /// which serves every strategy that trains its model; none: every model is
  /// profiled here.
  explicit profile_cache(std::optional<model::model_profile> given = std::nullopt)
    : given_(std::move(given)) {}
  caf::expected<model::model_profile> of(const actors::topology& t, int64_t batch,
                                         int32_t threads = 1, int32_t copies = 1) override;
  caf::expected<double> whole_step_of(const actors::topology& t, int64_t batch,
                                      int32_t copies) override;
  caf::expected<std::vector<double>> timed(
    const std::string& key,
    std::function<caf::expected<std::vector<double>>()> time) override;
  bool from_file() const override { return given_.has_value(); }
  /// The profiles made or read so far, by key.
  const std::map<std::string, model::model_profile>& all() const { return made_; }
  /// Profiles every model this cache profiled once more (and times every
  /// figure again); each profile is then the median of all its profiles
  /// (model::median_of_profiles), each figure its median. A comparison
  /// profiles in each of its rounds, after the round's runs, so that its
  /// predictions read the host in the windows its runs did: one profile of
  /// half a second is one spell of a shared host, and moved predictions by
  /// up to 40% between compares. Profiles read from the file are not taken
  /// again.
  void profile_again();
  /// How many profiles each one profiled here is the median of (1 before
  /// profile_again).
  int32_t rounds() const { return rounds_; }

private:
  std::optional<model::model_profile> given_;
  std::map<std::string, model::model_profile> made_;
  std::map<std::string, std::function<model::model_profile()>> makers_; ///< by key
  std::map<std::string, std::vector<model::model_profile>> taken_;     ///< by key
  /// timed(): what times each key's figures again, and every timing so far.
  std::map<std::string, std::function<caf::expected<std::vector<double>>()>> timers_;
  std::map<std::string, std::vector<std::vector<double>>> timings_;
  int32_t rounds_ = 1;
};

} // namespace baton::apps

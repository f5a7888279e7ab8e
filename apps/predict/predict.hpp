#pragma once

// `baton predict` and `baton compare --predict`: each strategy's step time on
// a workload from its profile and a link model (model/cost), at the hosts
// and bandwidths asked for (docs/cost-model.md).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "apps/args.hpp"

namespace baton::apps {

class profile_cache;

/// What to predict.
struct predict_request {
  std::string workload;                ///< WORKLOAD.yaml
  /// Its text, read once for every strategy and host count (compare passes
  /// the text its runs were derived from); none: predict() reads the file once.
  std::optional<std::string> workload_text;
  std::vector<std::string> overrides;  ///< the user's --set
  std::string strategies;              ///< a --strategies list ("": all that apply)
  std::vector<int32_t> measured_hosts; ///< configurations run (compare): predicted too
  /// By strategy: what its measured run's planning settled (the metrics'
  /// "settled", job_plan::settled: a pipeline's stages), as `--set`
  /// overrides given to that strategy at the measured host counts, so that
  /// the prediction costs the plan that ran instead of planning again on
  /// its own profile. Compare fills it from each row's median run.
  std::map<std::string, std::vector<std::string>> settled;
  std::vector<int32_t> hosts{4, 8, 16, 32, 64};         ///< the projection's hosts
  std::vector<double> bandwidths{125e6, 1.25e9, 12.5e9}; ///< bytes/s: 1, 10, 100 Gbit/s
  std::optional<double> latency;       ///< seconds (default: calibrated)
  std::string link;                    ///< the emulated link of the runs ("": loopback)
  std::string profile;                 ///< a `baton profile` file ("": profile now)
  /// Where the measured links (link-NAME.json) and the runtime's costs
  /// (runtime.json) are kept, measured once: "" = default_link_cache_dir()
  /// (link_calibration.hpp).
  std::string cache_dir;
  /// Told what predict() starts on (profiling, the link, the projection's
  /// simulations, the crossovers): a projection to 64 hosts simulates for
  /// tens of seconds. Empty: nothing is said.
  std::function<void(const std::string&)> progress;
};

/// The predictions as the report's "predictions" object (docs/cost-model.md):
/// the link model and how it was measured, the profile, the step time of
/// each strategy at each measured configuration, the projection over hosts
/// x bandwidths and the crossovers found. With `profiles`, the profiles are
/// that cache's (made there when missing); without, made for this call.
caf::expected<nlohmann::json> predict(const predict_request& r,
                                      const std::atomic<bool>* interrupted,
                                      profile_cache* profiles = nullptr);

/// Profiles into `profiles` every model predict(r) would profile (each
/// strategy at the base and at each measured host count), predicting
/// nothing: a comparison's first round.
caf::error profile_models(const predict_request& r, profile_cache& profiles);

/// `baton predict WORKLOAD.yaml [flags]`: the exit code.
int cmd_predict(args& a, const std::atomic<bool>* interrupted);

} // namespace baton::apps

#pragma once

// Projections of the cost model (model/cost/cost_model.hpp) to clusters that
// were not run, and the points where one strategy overtakes another: the
// figures of `baton compare --predict`'s plot, as data. Pure arithmetic.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cost/cost_model.hpp"

namespace baton::model::cost {

/// Bytes per second of `gbit` Gbit/s (1 Gbit/s = 125e6 bytes/s).
double gbit_per_second(double gbit);

/// The host counts and link rates (Gbit/s) of issue 24's projection.
const std::vector<int32_t>& default_projection_hosts();      ///< 4, 8, 16, 32, 64
const std::vector<double>& default_projection_gbit();        ///< 1, 10, 100
/// The same rates in bytes per second: 125e6, 1.25e9, 1.25e10.
const std::vector<double>& default_projection_bandwidths();

/// One point of a projection: a strategy on `hosts` hosts over links of
/// `bandwidth` bytes/s (the other link figures of the base link).
struct projection_point {
  int32_t hosts = 1;
  double bandwidth = 0;
  prediction predicted;
};

/// The prediction of `s` at every (hosts, bandwidth) pair, hosts outer.
std::vector<projection_point> project(const workload& w, const strategy& s, const link_model& base,
                                      const std::vector<int32_t>& hosts = default_projection_hosts(),
                                      const std::vector<double>& bandwidths =
                                        default_projection_bandwidths());

/// A strategy with the workload as it trains it: the strategies of one
/// comparison may train different models (IST its own mlp) or profiles
/// (a pipeline's at its microbatch).
struct costed {
  workload load;
  strategy plan;
  /// What the strategy is called where it was chosen (`fine-tune:adaptive`
  /// is costed as a ring); "" names it by its plan (name_of).
  std::string name = "";
};

/// Where two strategies swap places in samples per second along one axis
/// while the other stays fixed.
struct crossover {
  enum class axis { bandwidth, hosts };
  axis along = axis::bandwidth;
  /// bandwidth: the rate (bytes/s) where both predict the same samples/s;
  /// hosts: the first host count of the list at which `faster_above` leads.
  double at = 0;
  double fixed = 0;              ///< the other axis' value (hosts, or bandwidth bytes/s)
  std::string faster_above;      ///< the strategy that leads above `at`
  std::string faster_below;      ///< the one that leads below
  /// "data-parallel:ring overtakes pipeline:1f1b above 12.5 Gbit/s (8 hosts)".
  std::string sentence() const;
};

/// The first bandwidth in [low, high] (bytes/s) at which `a` and `b` swap
/// their order in samples/s on `c.hosts` hosts (the other link figures from
/// c.link), found on a log grid of 200 points and refined by bisection to a
/// relative 1e-9; nullopt when one leads over the whole range.
std::optional<crossover> bandwidth_crossover(const workload& w, const strategy& a,
                                             const strategy& b, const cluster& c, double low,
                                             double high);

std::optional<crossover> bandwidth_crossover(const costed& a, const costed& b, const cluster& c,
                                             double low, double high);

/// The first host count of `hosts` (increasing) at which the strategy that
/// leads at hosts.front() no longer leads, on `link`; nullopt when it leads
/// throughout. Host counts are integers: no bisection.
std::optional<crossover> hosts_crossover(const workload& w, const strategy& a, const strategy& b,
                                         const link_model& link,
                                         const std::vector<int32_t>& hosts);

std::optional<crossover> hosts_crossover(const costed& a, const costed& b, const link_model& link,
                                         const std::vector<int32_t>& hosts);

/// Every crossover of every pair of `strategies` on the projection's grid:
/// for each host count, along the bandwidth between the smallest and the
/// largest of `bandwidths`; for each bandwidth, along `hosts`. Pairs in the
/// order given (i < j), host counts before bandwidths.
std::vector<crossover> crossovers(const workload& w, const std::vector<strategy>& strategies,
                                  const link_model& base,
                                  const std::vector<int32_t>& hosts = default_projection_hosts(),
                                  const std::vector<double>& bandwidths =
                                    default_projection_bandwidths());

/// The same, each strategy with its own workload.
std::vector<crossover> crossovers(const std::vector<costed>& strategies, const link_model& base,
                                  const std::vector<int32_t>& hosts = default_projection_hosts(),
                                  const std::vector<double>& bandwidths =
                                    default_projection_bandwidths());

} // namespace baton::model::cost

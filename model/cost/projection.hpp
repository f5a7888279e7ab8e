#pragma once

// Projections of the cost model (model/cost/cost_model.hpp) to clusters that
// were not run, and the points where one strategy overtakes another: the
// figures of `baton compare --predict`'s plot, as data. Each is made by a
// predictor: the simulation of the strategy's plan on that many hosts
// (model/cost/simulated_plans.hpp, what predict and compare use) or the
// formulas. Pure arithmetic.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/cost/cost_model.hpp"
#include "model/cost/simulator.hpp"

namespace baton::model::cost {

/// How a projection predicts a step, and how finely it looks for a
/// crossover along the bandwidth: a log grid of `grid_points` between the
/// lowest and the highest rate, then bisection to a relative `precision`.
/// A simulation of 64 hosts of a parameter server takes about half a second
/// (4,096 messages a phase), so the simulation looks on a coarser grid than
/// the formulas, and to a rate within 1% (its steps are not closer than that).
struct predictor {
  std::function<prediction(const workload&, const cluster&, const strategy&)> step;
  int32_t grid_points = 200;
  double precision = 1e-9;
};

/// The formulas (predict): a grid of 200, to 1e-9.
const predictor& by_formula();
/// The simulation of each plan (simulate_prediction with `runtime`): a grid
/// of 13 (six points a decade over 1-100 Gbit/s), to 1e-2.
predictor by_simulation(const runtime_costs& runtime = {});

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
                                        default_projection_bandwidths(),
                                      const predictor& by = by_formula());

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
/// c.link), found on the predictor's log grid and refined by bisection to
/// its precision; nullopt when one leads over the whole range.
std::optional<crossover> bandwidth_crossover(const workload& w, const strategy& a,
                                             const strategy& b, const cluster& c, double low,
                                             double high, const predictor& by = by_formula());

std::optional<crossover> bandwidth_crossover(const costed& a, const costed& b, const cluster& c,
                                             double low, double high,
                                             const predictor& by = by_formula());

/// The first host count of `hosts` (increasing) at which the strategy that
/// leads at hosts.front() no longer leads, on `link`; nullopt when it leads
/// throughout. Host counts are integers: no bisection.
std::optional<crossover> hosts_crossover(const workload& w, const strategy& a, const strategy& b,
                                         const link_model& link,
                                         const std::vector<int32_t>& hosts,
                                         const predictor& by = by_formula());

std::optional<crossover> hosts_crossover(const costed& a, const costed& b, const link_model& link,
                                         const std::vector<int32_t>& hosts,
                                         const predictor& by = by_formula());

/// Every crossover of every pair of `strategies` on the projection's grid:
/// for each host count, along the bandwidth between the smallest and the
/// largest of `bandwidths`; for each bandwidth, along `hosts`. Pairs in the
/// order given (i < j), host counts before bandwidths. Each strategy's
/// prediction at a point of the grid is made once for every pair.
std::vector<crossover> crossovers(const workload& w, const std::vector<strategy>& strategies,
                                  const link_model& base,
                                  const std::vector<int32_t>& hosts = default_projection_hosts(),
                                  const std::vector<double>& bandwidths =
                                    default_projection_bandwidths(),
                                  const predictor& by = by_formula());

/// The same, each strategy with its own workload.
std::vector<crossover> crossovers(const std::vector<costed>& strategies, const link_model& base,
                                  const std::vector<int32_t>& hosts = default_projection_hosts(),
                                  const std::vector<double>& bandwidths =
                                    default_projection_bandwidths(),
                                  const predictor& by = by_formula());

} // namespace baton::model::cost

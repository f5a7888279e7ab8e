#include "model/cost/projection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "model/core/error.hpp"
#include "model/cost/simulated_plans.hpp"

namespace baton::model::cost {

namespace {

/// samples/s of a strategy on a cluster.
using rate_function = std::function<double(const costed&, const cluster&)>;

rate_function rate_by(const predictor& by) {
  return [&by](const costed& s, const cluster& c) {
    return by.step(s.load, c, s.plan).samples_per_second();
  };
}

/// The same, each strategy's rate at a (hosts, bandwidth) made once: one
/// crossovers() call asks every pair at the same grid points.
class remembered_rates {
public:
  explicit remembered_rates(const predictor& by) : rate_(rate_by(by)) {}
  double operator()(const costed& s, const cluster& c) {
    const auto key = std::make_tuple(&s, c.hosts, c.link.bandwidth);
    auto found = rates_.find(key);
    if (found == rates_.end())
      found = rates_.emplace(key, rate_(s, c)).first;
    return found->second;
  }

private:
  rate_function rate_;
  std::map<std::tuple<const costed*, int32_t, double>, double> rates_;
};

/// samples/s of a minus samples/s of b: > 0 where a leads.
double lead(const costed& a, const costed& b, const cluster& c, const rate_function& rate) {
  return rate(a, c) - rate(b, c);
}

std::vector<costed> on_one_workload(const workload& w, const std::vector<strategy>& strategies) {
  std::vector<costed> out;
  for (const strategy& s : strategies)
    out.push_back({w, s});
  return out;
}

cluster at_bandwidth(cluster c, double bandwidth) {
  c.link.bandwidth = bandwidth;
  return c;
}

std::string name_of(const costed& s) {
  return s.name.empty() ? name_of(s.plan) : s.name;
}

/// Fills the names: whoever leads where `lead_above` is measured.
crossover named(crossover x, const costed& a, const costed& b, double lead_above) {
  x.faster_above = name_of(lead_above > 0 ? a : b);
  x.faster_below = name_of(lead_above > 0 ? b : a);
  return x;
}

/// Appends `x` unless `out` says it already: the same sentence (two
/// strategies costed alike cross a third at the same place).
void add_once(std::vector<crossover>& out, const crossover& x) {
  const auto sentence = x.sentence();
  for (const auto& y : out)
    if (y.sentence() == sentence)
      return;
  out.push_back(x);
}

std::optional<crossover> along_bandwidth(const costed& a, const costed& b, const cluster& c,
                                         double low, double high, const predictor& by,
                                         const rate_function& rate);
std::optional<crossover> along_hosts(const costed& a, const costed& b, const link_model& link,
                                     const std::vector<int32_t>& hosts,
                                     const rate_function& rate);

} // namespace

const predictor& by_formula() {
  static const predictor formula{predict, 200, 1e-9};
  return formula;
}

predictor by_simulation(const runtime_costs& runtime) {
  return {[runtime](const workload& w, const cluster& c, const strategy& s) {
            return simulate_prediction(w, c, s, runtime);
          },
          13, 1e-2};
}

double gbit_per_second(double gbit) {
  return gbit * 125e6;
}

const std::vector<int32_t>& default_projection_hosts() {
  static const std::vector<int32_t> hosts{4, 8, 16, 32, 64};
  return hosts;
}

const std::vector<double>& default_projection_gbit() {
  static const std::vector<double> gbit{1, 10, 100};
  return gbit;
}

const std::vector<double>& default_projection_bandwidths() {
  static const std::vector<double> rates = [] {
    std::vector<double> out;
    for (double gbit : default_projection_gbit())
      out.push_back(gbit_per_second(gbit));
    return out;
  }();
  return rates;
}

std::vector<projection_point> project(const workload& w, const strategy& s, const link_model& base,
                                      const std::vector<int32_t>& hosts,
                                      const std::vector<double>& bandwidths, const predictor& by) {
  std::vector<projection_point> out;
  for (int32_t h : hosts)
    for (double bandwidth : bandwidths) {
      cluster c{h, base};
      c.link.bandwidth = bandwidth;
      out.push_back({h, bandwidth, by.step(w, c, s)});
    }
  return out;
}

std::string crossover::sentence() const {
  char text[256];
  if (along == axis::bandwidth)
    std::snprintf(text, sizeof text, "%s overtakes %s above %.3g Gbit/s (%g hosts)",
                  faster_above.c_str(), faster_below.c_str(), at / 125e6, fixed);
  else
    std::snprintf(text, sizeof text, "%s overtakes %s from %g hosts (%.3g Gbit/s)",
                  faster_above.c_str(), faster_below.c_str(), at, fixed / 125e6);
  return text;
}

std::optional<crossover> bandwidth_crossover(const workload& w, const strategy& a,
                                             const strategy& b, const cluster& c, double low,
                                             double high, const predictor& by) {
  return bandwidth_crossover(costed{w, a}, costed{w, b}, c, low, high, by);
}

std::optional<crossover> bandwidth_crossover(const costed& a, const costed& b, const cluster& c,
                                             double low, double high, const predictor& by) {
  return along_bandwidth(a, b, c, low, high, by, rate_by(by));
}

namespace {

std::optional<crossover> along_bandwidth(const costed& a, const costed& b, const cluster& c,
                                         double low, double high, const predictor& by,
                                         const rate_function& rate) {
  if (!(low > 0 && high > low))
    throw error("cost model: expected 0 < low < high bandwidths");
  const int32_t points = std::max(by.grid_points, 2);
  const double ratio = std::pow(high / low, 1.0 / (points - 1));
  double below = low;
  double lead_below = lead(a, b, at_bandwidth(c, below), rate);
  for (int32_t k = 1; k < points; ++k) {
    // The grid's points by their index (not by products of the ratio), so
    // that every pair asks the same rates.
    double above = k + 1 == points ? high : low * std::pow(ratio, k);
    double lead_above = lead(a, b, at_bandwidth(c, above), rate);
    if ((lead_below > 0) == (lead_above > 0)) {
      below = above;
      lead_below = lead_above;
      continue;
    }
    const double sign_above = lead_above;
    while (above / below - 1 > by.precision) {
      const double middle = std::sqrt(below * above);
      if ((lead(a, b, at_bandwidth(c, middle), rate) > 0) == (lead_below > 0))
        below = middle;
      else
        above = middle;
    }
    crossover x;
    x.along = crossover::axis::bandwidth;
    x.at = std::sqrt(below * above);
    x.fixed = c.hosts;
    return named(x, a, b, sign_above);
  }
  return std::nullopt;
}

std::optional<crossover> along_hosts(const costed& a, const costed& b, const link_model& link,
                                     const std::vector<int32_t>& hosts,
                                     const rate_function& rate) {
  if (hosts.empty())
    return std::nullopt;
  const bool a_leads_first = lead(a, b, cluster{hosts.front(), link}, rate) > 0;
  for (int32_t h : hosts) {
    const double lead_here = lead(a, b, cluster{h, link}, rate);
    if ((lead_here > 0) != a_leads_first) {
      crossover x;
      x.along = crossover::axis::hosts;
      x.at = h;
      x.fixed = link.bandwidth;
      return named(x, a, b, lead_here);
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<crossover> hosts_crossover(const workload& w, const strategy& a, const strategy& b,
                                         const link_model& link, const std::vector<int32_t>& hosts,
                                         const predictor& by) {
  return hosts_crossover(costed{w, a}, costed{w, b}, link, hosts, by);
}

std::optional<crossover> hosts_crossover(const costed& a, const costed& b, const link_model& link,
                                         const std::vector<int32_t>& hosts, const predictor& by) {
  return along_hosts(a, b, link, hosts, rate_by(by));
}

std::vector<crossover> crossovers(const workload& w, const std::vector<strategy>& strategies,
                                  const link_model& base, const std::vector<int32_t>& hosts,
                                  const std::vector<double>& bandwidths, const predictor& by) {
  return crossovers(on_one_workload(w, strategies), base, hosts, bandwidths, by);
}

std::vector<crossover> crossovers(const std::vector<costed>& strategies, const link_model& base,
                                  const std::vector<int32_t>& hosts,
                                  const std::vector<double>& bandwidths, const predictor& by) {
  std::vector<crossover> out;
  if (bandwidths.empty())
    return out;
  remembered_rates remembered(by);
  const rate_function rate = std::ref(remembered);
  const auto [low, high] = std::minmax_element(bandwidths.begin(), bandwidths.end());
  for (size_t i = 0; i < strategies.size(); ++i)
    for (size_t j = i + 1; j < strategies.size(); ++j) {
      const costed& a = strategies[i];
      const costed& b = strategies[j];
      for (int32_t h : hosts)
        if (*high > *low)
          if (auto x = along_bandwidth(a, b, cluster{h, base}, *low, *high, by, rate))
            add_once(out, *x);
      for (double bandwidth : bandwidths) {
        link_model link = base;
        link.bandwidth = bandwidth;
        if (auto x = along_hosts(a, b, link, hosts, rate))
          add_once(out, *x);
      }
    }
  return out;
}

} // namespace baton::model::cost

#include "model/cost/projection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/core/error.hpp"

namespace baton::model::cost {

namespace {

/// samples/s of a minus samples/s of b: > 0 where a leads.
double lead(const costed& a, const costed& b, const cluster& c) {
  return predict(a.load, c, a.plan).samples_per_second() -
         predict(b.load, c, b.plan).samples_per_second();
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

} // namespace

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
                                      const std::vector<double>& bandwidths) {
  std::vector<projection_point> out;
  for (int32_t h : hosts)
    for (double bandwidth : bandwidths) {
      cluster c{h, base};
      c.link.bandwidth = bandwidth;
      out.push_back({h, bandwidth, predict(w, c, s)});
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
                                             double high) {
  return bandwidth_crossover(costed{w, a}, costed{w, b}, c, low, high);
}

std::optional<crossover> bandwidth_crossover(const costed& a, const costed& b, const cluster& c,
                                             double low, double high) {
  if (!(low > 0 && high > low))
    throw error("cost model: expected 0 < low < high bandwidths");
  constexpr int points = 200;
  const double ratio = std::pow(high / low, 1.0 / (points - 1));
  double below = low;
  double lead_below = lead(a, b, at_bandwidth(c, below));
  for (int k = 1; k < points; ++k) {
    double above = k + 1 == points ? high : below * ratio;
    double lead_above = lead(a, b, at_bandwidth(c, above));
    if ((lead_below > 0) == (lead_above > 0)) {
      below = above;
      lead_below = lead_above;
      continue;
    }
    const double sign_above = lead_above;
    while (above / below - 1 > 1e-9) {
      const double middle = std::sqrt(below * above);
      if ((lead(a, b, at_bandwidth(c, middle)) > 0) == (lead_below > 0))
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

std::optional<crossover> hosts_crossover(const workload& w, const strategy& a, const strategy& b,
                                         const link_model& link,
                                         const std::vector<int32_t>& hosts) {
  return hosts_crossover(costed{w, a}, costed{w, b}, link, hosts);
}

std::optional<crossover> hosts_crossover(const costed& a, const costed& b, const link_model& link,
                                         const std::vector<int32_t>& hosts) {
  if (hosts.empty())
    return std::nullopt;
  const bool a_leads_first = lead(a, b, cluster{hosts.front(), link}) > 0;
  for (int32_t h : hosts) {
    const double lead_here = lead(a, b, cluster{h, link});
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

std::vector<crossover> crossovers(const workload& w, const std::vector<strategy>& strategies,
                                  const link_model& base, const std::vector<int32_t>& hosts,
                                  const std::vector<double>& bandwidths) {
  return crossovers(on_one_workload(w, strategies), base, hosts, bandwidths);
}

std::vector<crossover> crossovers(const std::vector<costed>& strategies, const link_model& base,
                                  const std::vector<int32_t>& hosts,
                                  const std::vector<double>& bandwidths) {
  std::vector<crossover> out;
  if (bandwidths.empty())
    return out;
  const auto [low, high] = std::minmax_element(bandwidths.begin(), bandwidths.end());
  for (size_t i = 0; i < strategies.size(); ++i)
    for (size_t j = i + 1; j < strategies.size(); ++j) {
      const costed& a = strategies[i];
      const costed& b = strategies[j];
      for (int32_t h : hosts)
        if (*high > *low)
          if (auto x = bandwidth_crossover(a, b, cluster{h, base}, *low, *high))
            add_once(out, *x);
      for (double bandwidth : bandwidths) {
        link_model link = base;
        link.bandwidth = bandwidth;
        if (auto x = hosts_crossover(a, b, link, hosts))
          add_once(out, *x);
      }
    }
  return out;
}

} // namespace baton::model::cost

#include "apps/bench/rounds.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace baton::apps {
inline namespace bench {

std::vector<double> ratios_by_round(const std::vector<round_rate>& side,
                                    const std::vector<round_rate>& reference, int32_t units) {
  std::map<int32_t, double> limits; // per round
  for (const auto& r : reference)
    limits[r.round] = units * r.samples_per_second;
  std::map<int32_t, double> ratios;
  for (const auto& r : side)
    if (auto it = limits.find(r.round); it != limits.end())
      ratios[r.round] = it->second > 0 ? r.samples_per_second / it->second : 0;
  std::vector<double> out;
  for (const auto& [round, ratio] : ratios)
    out.push_back(ratio);
  return out;
}

std::string rounds_text(std::vector<double> ratios) {
  std::string text;
  char cell[32];
  for (double r : ratios) {
    std::snprintf(cell, sizeof cell, "%s%.2f", text.empty() ? "" : " ", r);
    text += cell;
  }
  std::sort(ratios.begin(), ratios.end());
  std::snprintf(cell, sizeof cell, " (median %.2f)", ratios[ratios.size() / 2]);
  return text + cell;
}

std::string side_rounds::text(const std::string& peer) const {
  std::string text;
  if (!of_limit.empty())
    text = "of limit " + rounds_text(of_limit);
  if (!vs_pytorch.empty())
    text += (text.empty() ? "" : ", ") + ("vs " + peer + " ") + rounds_text(vs_pytorch);
  return text;
}

} // namespace bench
} // namespace baton::apps

#include "actors/runtime/placement.hpp"

#include <algorithm>
#include <cstdint>

namespace baton::actors {
inline namespace runtime {

namespace {

/// Listed live and not lost (the coordinator never lists a lost node live;
/// a lost node wins if it does).
bool is_live(const placement& nodes, const std::string& node) {
  return nodes.lost.count(node) == 0 &&
         std::find(nodes.live.begin(), nodes.live.end(), node) != nodes.live.end();
}

/// Actors on `node` now, counting each lost node moved there as one more.
size_t load_of(const placement& nodes, const std::string& node) {
  auto it = nodes.actors_on.find(node);
  size_t load = it == nodes.actors_on.end() ? 0 : it->second;
  for (const auto& [from, to] : nodes.moved)
    load += to == node ? 1 : 0;
  return load;
}

} // namespace

placement_choice node_for(const std::string& placed, const placement& nodes) {
  if (nodes.lost.count(placed) == 0)
    return {placed, false}; // an unknown node too: spawning there says so
  if (auto it = nodes.moved.find(placed); it != nodes.moved.end() && is_live(nodes, it->second))
    return {it->second, false};
  placement_choice choice;
  size_t fewest = SIZE_MAX;
  for (const auto& node : nodes.live) {
    if (nodes.lost.count(node) != 0)
      continue;
    if (auto load = load_of(nodes, node); load < fewest) {
      fewest = load;
      choice.node = node;
    }
  }
  choice.moves = !choice.node.empty();
  return choice;
}

std::vector<thread_oversubscription>
oversubscribed_nodes(const job_plan& plan, const std::map<std::string, int32_t>& node_cores) {
  std::map<std::string, int32_t> threads; // node -> torch threads
  for (const auto& a : plan.actors)
    threads[a.node] += a.threads;
  std::vector<thread_oversubscription> over;
  for (const auto& [node, n] : threads) {
    auto it = node_cores.find(node);
    auto cores = it == node_cores.end() ? 0 : it->second;
    if (cores > 0 && n > cores)
      over.push_back({node, n, cores});
  }
  return over;
}

std::vector<std::string> thread_budget_warnings(const job_plan& plan,
                                                const std::map<std::string, int32_t>& node_cores) {
  std::vector<std::string> warnings;
  if (plan.threads_asked_by.empty())
    return warnings;
  for (const auto& over : oversubscribed_nodes(plan, node_cores))
    warnings.push_back("node '" + (over.node.empty() ? std::string{"embedded"} : over.node) +
                       "' runs " + std::to_string(over.threads) + " compute threads on " +
                       std::to_string(over.cores) + " cores (as the topology asks with " +
                       plan.threads_asked_by + "): they will share the cores");
  return warnings;
}

} // namespace runtime
} // namespace baton::actors

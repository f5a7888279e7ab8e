#include "actors/modes/worker_group.hpp"

namespace baton::actors {
inline namespace modes {

std::string worker_name(int32_t worker) {
  return "worker." + std::to_string(worker);
}

std::string shard_name(int32_t shard) {
  return "shard." + std::to_string(shard);
}

std::vector<messages::edge_stats> edges_to(const std::string& from, int32_t count,
                                           std::string (*name_of)(int32_t)) {
  std::vector<messages::edge_stats> edges;
  for (int32_t peer = 0; peer < count; ++peer)
    edges.push_back({from, name_of(peer), 0, 0});
  return edges;
}

void refuse_edge_faults(const detail::field& root, const topology& t, const std::string& job,
                        const std::string& why) {
  if (t.faults.empty())
    return;
  size_t i = 0;
  for (const detail::field& item : root.require("faults").items("a list of faults", max_faults)) {
    const auto& f = t.faults.at(i++);
    if (f.kind == "delay" || f.kind == "drop")
      item.fail("fault '" + f.kind + "' is not supported by job: " + job + " (" + why +
                "; expected throw, kill_node, stop_node or chaos)");
  }
}

} // namespace modes
} // namespace baton::actors

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

} // namespace modes
} // namespace baton::actors

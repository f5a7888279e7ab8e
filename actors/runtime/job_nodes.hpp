#pragma once

// The nodes of a job as its coordinator sees them: the spawner of each node
// (or of the embedded process), the cores each reported, and the nodes lost
// during the run with where their actors went. The coordinator asks through
// its own blocking actor, which also receives the spawners' down messages (a
// closed connection: the node is gone) and the events of the node watch (a
// silent node: late, or lost past its limit; node_watch.hpp).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/node_watch.hpp"
#include "actors/roles/role_type.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

/// The spawners a job's actors are started by.
class job_nodes {
public:
  /// Nodes reached through `self` (which must outlive this and monitors
  /// every node's spawner), with `timeout` for each request.
  job_nodes(caf::blocking_actor* self, std::chrono::milliseconds timeout)
    : self_(self), timeout_(timeout) {}

  /// Connects to every node of `c` and asks each for its cores (a node that
  /// does not answer is warned about and not judged by its cores). A job
  /// without nodes gets a spawner in this process ("" its node name) that
  /// may spawn `roles`. errc::node_unreachable naming the node and where the
  /// topology lists it (its entry, else `file`) when one cannot be reached.
  caf::error connect(const cluster& c, const std::string& file, std::vector<role_type> roles);

  /// Gives every pair of nodes of `c` its direct connection, one pair at a
  /// time, before any actor exists: the node listed first connects to the
  /// other. CAF 0.17's automatic connections open them on first use instead,
  /// from both ends at once when two nodes learn of each other together, and
  /// 0.17.6 then attributes one of the two connections to no node and drops
  /// what arrives on it (fixed in CAF 0.18 by actor-framework PR #1070): a
  /// run stalled about once in 150 three-node runs. A pair that cannot
  /// connect is warned about; its messages go through this process. With
  /// TLS nothing is done: nodes already talk through the coordinator.
  void connect_peers(const cluster& c);

  /// The nodes still reachable ("" the embedded process), by name.
  std::vector<std::string> live() const;
  /// Whether every node is lost.
  bool empty() const { return spawners_.empty(); }
  /// The spawner of live node `node`, or nullptr (lost or unknown).
  const caf::actor* spawner_of(const std::string& node) const;
  /// Node name -> hardware threads, of the nodes that reported them.
  const std::map<std::string, int32_t>& cores() const { return cores_; }

  /// The node an actor placed on `placed` runs on (see placement.hpp), when
  /// `actors_on` says how many actors of the pass each node has. When a
  /// lost node's actors move, says so once and remembers where.
  std::string node_for(const std::string& placed, std::map<std::string, size_t> actors_on);
  /// When `source` is a node's spawner, the node is lost: its name.
  std::optional<std::string> lose(const caf::actor_addr& source);

  /// The watch (node_watch.hpp) says live node `node` has not answered for
  /// `silent_ms`: lost past the limit (the node is removed; returns what
  /// happened, for the error), else warned about as slow (nothing returned).
  std::optional<std::string> late(const std::string& node, int64_t silent_ms);
  /// The watch says late node `node` answered after `silent_ms`.
  void back(const std::string& node, int64_t silent_ms) const;

  /// Appends each live node's report of its usage (a node that does not
  /// answer is warned about) and this process's ("coordinator"); a job
  /// without nodes has one report, "embedded".
  void collect_reports(const cluster& c, std::vector<messages::node_report>& into);
  /// Ends the embedded spawner, if any (listed nodes keep running).
  void shutdown();

private:
  caf::blocking_actor* self_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, caf::actor> spawners_; ///< node name ("" embedded) -> spawner
  std::map<std::string, int32_t> cores_;       ///< node name -> hardware threads
  caf::actor embedded_spawner_;
  std::set<std::string> lost_;
  std::map<std::string, std::string> moved_; ///< lost node -> where its actors went
  liveness_limits limits_;                    ///< when a silent node is late, lost
  caf::actor watch_;                          ///< the node watch; none when embedded

  /// Starts the watch over the nodes that give their pulse actor.
  void start_watch(const cluster& c);
};

/// Each node's CPU seconds of `ended` less those of `started` (by name):
/// the CPU of training, over the same interval as train_seconds, not the
/// start-up's (loading LibTorch and the data), which made a node's CPU use
/// over the training time exceed 100%.
void cpu_since(const std::vector<messages::node_report>& started,
               std::vector<messages::node_report>& ended);

} // namespace runtime
} // namespace baton::actors

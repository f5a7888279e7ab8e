#pragma once

// Where an actor runs when the node the plan placed it on is lost, and the
// nodes asked for more threads than they have: plain data in, a node out
// (no actor system; the coordinator does the spawning). The plan's first
// placement is a step over it before the run (settle_plan, plan_checks.hpp).

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace runtime {

/// What the coordinator knows of the nodes when it spawns an actor.
struct placement {
  /// Nodes still reachable ("" = the embedded process), in order: on a tie
  /// the first one wins.
  std::vector<std::string> live;
  std::set<std::string> lost; ///< nodes lost during the run
  /// Node -> actors of this pass already spawned there (a node missing
  /// here has none, as a spare node the plan left empty).
  std::map<std::string, size_t> actors_on;
  std::map<std::string, std::string> moved; ///< lost node -> where its actors went
};

/// The node an actor goes to, and whether its lost node moves there now.
struct placement_choice {
  std::string node; ///< "" when no node survives (or the job runs embedded)
  /// `node` is a new destination for the lost node: record it in
  /// placement::moved so that its other actors follow.
  bool moves = false;
};

/// The node an actor placed on `placed` runs on: `placed` while it is not
/// lost; else the node its actors already moved to, if still live; else the
/// live node with the fewest actors (actors spawned there plus lost nodes
/// moved there), so spare nodes first. Never a lost node.
placement_choice node_for(const std::string& placed, const placement& nodes);

/// A node asked to run more compute threads than it has cores.
struct thread_oversubscription {
  std::string node;    ///< "" = the embedded process
  int32_t threads = 0; ///< the plan's compute threads there (planned_actor::threads)
  int32_t cores = 0;   ///< the node's hardware threads
};

/// The nodes where `plan` places more compute threads than `node_cores`
/// (node -> hardware threads, as each node reported them) says they have,
/// by node name. A node that did not report its cores (or reported 0) is
/// not judged. Threads are summed by the node the plan placed each actor
/// on: they share the cores, which is slower but works.
std::vector<thread_oversubscription>
oversubscribed_nodes(const job_plan& plan, const std::map<std::string, int32_t>& node_cores);

/// The warning for each node oversubscribed_nodes finds, when the topology
/// set the threads (plan.threads_asked_by); none for derived budgets, which
/// give every actor an equal share of the cores, at least one thread.
std::vector<std::string> thread_budget_warnings(const job_plan& plan,
                                                const std::map<std::string, int32_t>& node_cores);

} // namespace runtime
} // namespace baton::actors

#pragma once

// Fault injection as plain data: which of the topology's faults fire when,
// and which one explains a failure. No actor system and no clock: the
// coordinator passes the time in and does the sending (fault_atom to a
// node's spawner or to an actor).

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/config/topology.hpp"

namespace baton::actors {

/// Whether `f` kills or stops a node (kill_node, stop_node).
bool is_node_fault(const fault_spec& f);

/// The injected fault that explains a failure: what the fault record says.
struct explained_fault {
  std::string kind;   ///< throw | kill_node | stop_node | drop
  std::string target; ///< the actor, the node, or the edge "from->to"
  int64_t at_step = -1; ///< the step it was set for (-1: none, e.g. set by time)
  /// Injection to detection; 0 when the actor reported its own exception.
  int64_t detected_after_ms = 0;
};

/// The topology's faults and what became of them in a run.
class fault_injector {
public:
  using clock_type = std::chrono::steady_clock;

  /// An injector with no faults.
  fault_injector() = default;
  /// Arms `faults` (a topology's `faults:`); a chaos entry sets the chaos
  /// rate and seeds its random choices.
  explicit fault_injector(const std::vector<fault_spec>& faults);

  // -- when an actor is spawned ---------------------------------------------

  /// The step at which trainable actor `actor` throws (recovery_spec::
  /// throw_at_step), -1 for none. Armed once: the throw counts as fired, so
  /// the actor restarted after it does not throw again.
  int64_t throw_step_for(const std::string& actor);
  /// The step from which the last trainable actor reports its steps: the
  /// first step a node fault waits for, 1 under chaos, -1 for never.
  int64_t notify_from_step() const;
  /// The delay and drop faults to set on their sender's edge in a new pass
  /// (a drop that happened is not set again), in topology order.
  std::vector<fault_spec> edge_faults() const;

  // -- while training ---------------------------------------------------------

  /// The job made step `step` (reported by the last trainable actor) at
  /// `now`: the faults that fire, in order — node faults set for this step,
  /// then chaos's choice. `live_nodes` are the reachable nodes ("" the
  /// embedded process, never chosen), `trainable` the trainable actors of
  /// this pass. A step not past the newest one (a replay) fires nothing.
  /// A fired node fault has kind kill_node or stop_node; chaos's throw has
  /// kind throw and where "chaos".
  std::vector<fault_spec> on_step(int64_t step, clock_type::time_point now,
                                  const std::vector<std::string>& live_nodes,
                                  const std::vector<std::string>& trainable);
  /// The node faults set for a time since training started that are due:
  /// `since_start` is that time at `now`. Each fires once.
  std::vector<fault_spec> due(clock_type::duration since_start, clock_type::time_point now);
  /// Sender `from` reports that it dropped a microbatch at `now`: the drop
  /// faults that fired with it (each fires once; later reports return none).
  std::vector<fault_spec> dropped(const std::string& from, clock_type::time_point now);

  // -- after a failure ----------------------------------------------------------

  /// The injected fault that explains a failure of `target` detected at
  /// `detected`: a node or drop fault that fired, else a throw armed in (or
  /// sent to) `target`. Each explains one failure: it is not returned again.
  std::optional<explained_fault> explain(const std::string& target,
                                         clock_type::time_point detected);

  /// The newest step the job reported (-1 before any).
  int64_t last_step() const { return last_step_; }

private:
  /// A fault of the topology, and whether it fired.
  struct armed_fault {
    fault_spec spec;
    bool fired = false;
    clock_type::time_point at; ///< when it fired ({}: the actor threw it itself)
    bool counted = false;      ///< it explained a failure
  };

  void fire(armed_fault& f, clock_type::time_point now, std::vector<fault_spec>& fired);
  std::optional<fault_spec> chaos_at(int64_t step, clock_type::time_point now,
                                     const std::vector<std::string>& live_nodes,
                                     const std::vector<std::string>& trainable);

  std::vector<armed_fault> faults_; ///< the topology's, then chaos's as they fire
  std::optional<fault_spec> chaos_;
  std::mt19937_64 chaos_rng_;
  int64_t last_step_ = -1;
};

} // namespace baton::actors

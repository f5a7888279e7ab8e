#pragma once

// Fault injection as plain data: which of the topology's faults fire when,
// which one explains a failure (and how its record reads), and which can
// never fire in the job at hand. No actor system and no clock: the
// coordinator passes the time in and does the sending (fault_atom to a
// node's spawner or to an actor).

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"

namespace baton::actors {
inline namespace runtime {

/// Whether `f` kills or stops a node (kill_node, stop_node).
bool is_node_fault(const fault_spec& f);

/// Why a node fault of `faults` can never fire, as the error to refuse the
/// run with: the first one naming a node not among `nodes` (the connected
/// nodes; "" when the job is `embedded` in one process). None when all can.
std::optional<std::string> unknown_fault_node(const std::vector<fault_spec>& faults,
                                              const std::vector<std::string>& nodes,
                                              bool embedded);

/// A warning for each fault of `faults` set for a step past the job's end:
/// a job of `epochs` epochs over `samples` training samples (all epochs) in
/// minibatches of `batch_size`. The parser refuses these when it knows the
/// job's length; when a node reads the data it is known only as the run
/// starts.
std::vector<std::string> unreachable_fault_warnings(const std::vector<fault_spec>& faults,
                                                    int64_t samples, int64_t epochs,
                                                    int64_t batch_size);

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

  /// The step at which trainable actor `actor` throws (recovery_settings::
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
  /// The record of a failure (`kind`: actor_failed, actor_down, node_lost,
  /// stalled) of `target` detected at `detected`, after which the job
  /// restarts from `restored_step`: at the newest step the job reported,
  /// and in the words of the injected fault that explains it, if one does
  /// (explain). Not yet recovered (recovered_after_ms is -1).
  fault_record record_failure(const std::string& kind, const std::string& target,
                              int64_t restored_step, clock_type::time_point detected);

  /// Whether an injected fault explains a failure of `target` (explain
  /// would return one), without counting it.
  bool explains(const std::string& target) const;
  /// An error of actor `target` with code `code` at its step `step`, which
  /// no injected fault explains: whether the same actor failed with the same
  /// code at the same step before in this run (and the job restarted since),
  /// an error a restart does not cure. Each such error is remembered.
  bool recurs(const std::string& target, uint8_t code, int64_t step);

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
  /// The index in faults_ of the fault that explains a failure of `target`.
  std::optional<size_t> explaining(const std::string& target) const;
  std::optional<fault_spec> chaos_at(int64_t step, clock_type::time_point now,
                                     const std::vector<std::string>& live_nodes,
                                     const std::vector<std::string>& trainable);

  std::vector<armed_fault> faults_; ///< the topology's, then chaos's as they fire
  std::optional<fault_spec> chaos_;
  std::mt19937_64 chaos_rng_;
  int64_t last_step_ = -1;
  std::set<std::tuple<std::string, uint8_t, int64_t>> unexplained_; ///< recurs()'s errors
};

/// The line that says the job recovered from `f`: "recovered from kill_node
/// of 'n2' in 812 ms (detected after 35 ms)"; a failure baton did not
/// inject says what its detection is counted from ("detected 840 ms after
/// its last heartbeat"), and an unknown detection time is left out.
std::string recovered_text(const fault_record& f);

} // namespace runtime
} // namespace baton::actors

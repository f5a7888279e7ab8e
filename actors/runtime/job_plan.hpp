#pragma once

// What the runtime runs: a training mode turns its topology section into a
// job_plan, and the coordinator places, spawns, wires, supervises, restarts
// and collects any plan without knowing which mode made it. Plain data: no
// CAF, no mode.
//
//   mode (actors/modes/<m>/)          runtime (actors/runtime/)
//   topology section -> job_plan  ->  spawn actors in order, introduce edges
//                                     in order, start the `starts`, merge
//                                     the reports of each result group

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace baton::actors {
inline namespace runtime {

/// One actor of a job, as a mode asks for it.
struct planned_actor {
  std::string role;     ///< a role of the role table: "source", "head", ...
  std::string name;     ///< unique in the job: faults, checkpoints and metrics name it
  /// The node it is placed on; "" = not placed (place_round_robin gives it
  /// one), or the embedded process once placed.
  std::string node;
  /// "" or the actor whose node it shares, wherever that one goes (an IST
  /// shard beside its worker): placement gives it no slot of its own.
  std::string with;
  std::string settings; ///< the role's settings (YAML); the runtime adds `run:`
  int32_t threads = 1;  ///< compute threads, checked against the node's cores
  /// Its budget was asked (runtime.compute_threads, runtime.head_threads):
  /// set_thread_budgets leaves it as it is.
  bool threads_asked = false;
  /// Checkpointed and restored on a restart; a `throw` fault (and chaos) may
  /// name it. The last trainable actor in plan order reports its steps.
  bool trainable = false;
  bool starts = false;  ///< sent start_atom once every edge is wired (a source)
  /// "" or the result this actor reports into: one result per group, its
  /// members' reports merged (samples add, loss weighted by samples, the
  /// accuracy of the member that evaluated). Replicas share one group.
  std::string result;
  /// Sends its weights at the end (replica 0 of each pipeline stage): the
  /// job's weights, in plan order.
  bool sends_weights = false;
};

/// An actor with its role, name, node and settings, the rest as defaulted.
inline planned_actor make_planned_actor(std::string role, std::string name, std::string node,
                                        std::string settings) {
  planned_actor a;
  a.role = std::move(role);
  a.name = std::move(name);
  a.node = std::move(node);
  a.settings = std::move(settings);
  return a;
}

/// How two actors are introduced, in plan order: a sender adds its
/// receivers in the order of its edges.
struct planned_edge {
  enum class kind_t {
    data, ///< `from` sends microbatches to `to` under a credit window
    peer  ///< `from` is told `to`'s handle as its peer number `index`
  };
  kind_t kind = kind_t::data;
  std::string from;
  std::string to;
  int32_t index = 0; ///< peer edges: `to`'s place in `from`'s group
};

/// A whole job: what to spawn and how to connect it.
struct job_plan {
  std::vector<planned_actor> actors; ///< spawned in this order
  std::vector<planned_edge> edges;   ///< introduced in this order
  /// What a user of this mode should change when its training loss stops
  /// being finite (the mode's own keys and why: its lr, batch, staleness);
  /// the coordinator's divergence warning says it. "" = a generic advice.
  std::string divergence_advice;

  // -- how the output names the job (results table, metrics, curves) --------------
  /// The strategy, as the metrics' `mode` and the results table's footer name
  /// it ("transfer", "pipeline", "data-parallel", "ist", "resist"); "" = the
  /// topology's `job:`.
  std::string strategy;
  /// What one result group is, as the results table's first column and the
  /// curves' `kind` name it: "head" (transfer), "stage" (pipeline: the last
  /// stage), "workers" (data-parallel, IST: the workers' merged result).
  std::string result_label = "head";
  /// The progress messages count one of this many equal shares of the job's
  /// samples (data-parallel and IST: worker 0 reports for its W workers), so
  /// the progress line multiplies them; 1: they count the job's samples.
  int32_t progress_shares = 1;
  /// The topology's keys that set its actors' compute threads, comma
  /// separated, as the coordinator's warning names them
  /// ("runtime.compute_threads", and a strategy's own budget key); "":
  /// derived budgets, which share the cores already, so the coordinator
  /// warns only about asked ones that exceed a node's cores.
  std::string threads_asked_by;
  /// What planning a run settled that the topology left open, measured
  /// (`plan_use::run`), as `--set` overrides that give another run the same
  /// plan without measuring: a pipeline's `stages: auto` as
  /// "pipeline.stages=[{last_layer: pool3}, {last_layer: fc2}]". The
  /// metrics write them as "settled"; compare's check predicts a run with
  /// them. Empty: nothing was left open.
  std::vector<std::string> settled;

  /// The actor named `name`, or nullptr.
  const planned_actor* find(const std::string& name) const {
    for (const auto& a : actors)
      if (a.name == name)
        return &a;
    return nullptr;
  }

  /// The names of the trainable actors, in plan order.
  std::vector<std::string> trainable_names() const {
    std::vector<std::string> out;
    for (const auto& a : actors)
      if (a.trainable)
        out.push_back(a.name);
    return out;
  }

  /// The result groups (the job's heads), each once.
  std::set<std::string> result_groups() const {
    std::set<std::string> out;
    for (const auto& a : actors)
      if (!a.result.empty())
        out.insert(a.result);
    return out;
  }

  /// How many actors report into result group `result`.
  size_t group_size(const std::string& result) const {
    size_t n = 0;
    for (const auto& a : actors)
      n += !result.empty() && a.result == result ? 1 : 0;
    return n;
  }
};

} // namespace runtime
} // namespace baton::actors

#pragma once

// What the `baton` commands do, behind the argument parsing of apps/.

#include <atomic>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/roles/role_type.hpp"
#include "actors/runtime/job_facts.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/run_record.hpp"

namespace baton::actors {
inline namespace runtime {

/// `baton run` and `baton pretrain` arguments.
struct run_request {
  std::string topology_path;             ///< empty: the built-in default
  /// topology_path's text when the caller has read it already (`baton
  /// launch`: each rank reads the file for the node names, and rank 0 runs
  /// the job from that same text); empty: the file is read.
  std::string topology_text;
  std::vector<std::string> overrides;    ///< --set key=value
  int32_t local_nodes = 0;               ///< --local-nodes N
  std::string link;                      ///< --link RATE[,DELAY]: local nodes on emulated hosts
  std::string baseline;                  ///< --baseline separate
  std::string mode;                      ///< --mode local (one process, no actors)
  std::string only_head;                 ///< --only-head NAME (with --mode local)
  int32_t threads = 0;                   ///< --threads (local mode); 0 = all cores
  std::string metrics_out;               ///< --metrics-out FILE
  std::string trace_out;                 ///< --trace FILE (job: pipeline, actors)
  std::string save_model;                ///< --save-model FILE (job: pipeline)
  std::string resume_dir;                ///< --resume DIR (checkpoints of a killed run)
  std::string curves;                    ///< --curves FILE.csv (curves.hpp)
  bool progress_tty = false;
  const std::atomic<bool>* interrupted = nullptr;
};

/// The `--set` override that appends the fault `--fault TEXT` describes:
/// "kind=throw,actor=stage1,at_step=5" -> "faults.+={kind: throw, ...}".
caf::expected<std::string> fault_override(const std::string& text);

/// The topology and options of the run `r` describes, `text` being the
/// topology as the run read it (topology::text); with --resume DIR and a
/// record there, the recorded topology (unless `r` names one) and the
/// recorded options followed by `r`'s. Its outputs are `r`'s; its run id is
/// new, or the resumed run's.
caf::expected<run_record> request_record(const run_request& r, const std::string& text);

/// `--resume DIR`: the outputs the recorded run was started with
/// (--metrics-out, --curves, --trace, --save-model; run.yaml's `outputs`)
/// are written again: each one `r` does not name is set to the recorded
/// path (logged); a flag given with --resume wins. Nothing without --resume
/// or a record; errc::bad_file when the record cannot be read.
caf::error with_recorded_outputs(run_request& r);

/// What a mode hands the runtime for an actor run.
struct actor_job {
  /// Made once, before anything starts: its actors placed on the cluster's
  /// nodes (by name), its faults checked, the thread budgets the topology
  /// leaves unset derived (modes' plan_of).
  job_plan plan;
  /// Where it runs: the nodes (with `--local-nodes N`, n1..nN, whose
  /// addresses are known once they run), the runtime's limits, TLS and the
  /// injected faults.
  cluster where;
  job_facts facts;              ///< names for messages and results, the job's length
  std::vector<role_type> roles; ///< what the embedded process may spawn
  /// The topology's text as the run read it (topology::text): what its run
  /// record keeps, never the file read again.
  std::string topology_text;
};

/// Runs `job` with actors: embedded in this process, on the cluster's
/// nodes, or on `--local-nodes` N processes started (and always stopped)
/// here, the cluster's n1..nN. The checkpoint directory is claimed first
/// (claim_checkpoint_dir: locked for the run, refused when a live run holds
/// it); checkpoints nobody named go to a directory of the run's, removed
/// after a successful run. A failed run keeps its checkpoints and its error
/// says where they are and how to resume. See run_actor_job (coordinator.hpp).
caf::expected<job_result> run_actors(actor_job job, const run_request& r);

/// After the outputs of a successful run (`r`, `result`) are written: its
/// run.yaml says it finished, where its metrics and model are, so that
/// `--resume` of it is refused and a new run may take its directory. A
/// record that cannot be written is a warning: the run's outputs stand.
void record_finished(const run_request& r, const job_result& result);

} // namespace runtime
} // namespace baton::actors

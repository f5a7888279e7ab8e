#pragma once

// `baton launch`: one process per host, started by any launcher (torchrun,
// Slurm's srun, Kubeflow's PyTorchJob, mpirun, a hostfile and ssh). Every
// rank runs a node; rank 0 also runs the job over them, as `baton run` on
// listed nodes (docs/running-on-a-cluster.md).

#include <atomic>
#include <map>
#include <string>

#include <caf/expected.hpp>

#include "actors/modes/run.hpp"
#include "actors/runtime/jobs.hpp"
#include "apps/args.hpp"

namespace baton::apps {

/// This process's environment variables by name (what launchers set: RANK,
/// WORLD_SIZE, SLURM_*, TORCHELASTIC_RUN_ID, ...).
std::map<std::string, std::string> environment_variables();

/// Runs `baton launch TOPOLOGY.yaml [flags]` (the arguments after `launch`)
/// until the job ends, `interrupted` becomes true or a rank is lost; the
/// process exit code: the job's on every rank (0 on success), 1 when a rank
/// was lost, 2 for bad input.
int cmd_launch(args& a, const std::atomic<bool>& interrupted);

/// The exit code of `baton run` (and of rank 0 of `baton launch`) for a run
/// whose outputs run_job wrote: 0, 2 for a run that failed but kept its
/// work in the outputs, 1 for a run whose training loss, and so its
/// weights, went non-finite; an error (no run, or outputs not written) is
/// logged and gives its code.
int report_run(caf::expected<actors::job_result> run);

} // namespace baton::apps

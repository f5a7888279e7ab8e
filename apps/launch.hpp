#pragma once

// `baton launch`: one process per host, started by any launcher (torchrun,
// Slurm's srun, Kubeflow's PyTorchJob, mpirun, a hostfile and ssh). Every
// rank runs a node; rank 0 also runs the job over them, as `baton run` on
// listed nodes (docs/running-on-a-cluster.md).

#include <atomic>

#include "apps/args.hpp"

namespace baton::apps {

/// Runs `baton launch TOPOLOGY.yaml [flags]` (the arguments after `launch`)
/// until the job ends, `interrupted` becomes true or a rank is lost; the
/// process exit code: the job's on every rank (0 on success), 1 when a rank
/// was lost, 2 for bad input.
int cmd_launch(args& a, const std::atomic<bool>& interrupted);

} // namespace baton::apps

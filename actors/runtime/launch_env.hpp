#pragma once

// Who a `baton launch` process is and where rank 0 is, read from its flags
// and from the variables that launchers set: torchrun and Kubeflow's
// PyTorchJob (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK), Open
// MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID,
// SLURM_NTASKS, SLURM_JOB_NODELIST) and a hostfile (`host slots=N` lines, as
// DeepSpeed and Horovod read them). Plain data and text: no process, no
// socket.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace baton::actors {
inline namespace runtime {

/// The most hosts a node list or a hostfile may name (a typo such as
/// `n[0-99999999]` must be an error, not a hundred million strings).
inline constexpr size_t max_launch_hosts = 65536;

/// The rendezvous port when no MASTER_PORT and no --rendezvous-port say
/// which: torchrun's default MASTER_PORT (29500) + 1. Under Slurm the job id
/// moves it (see launch_identity::rendezvous_port).
inline constexpr uint16_t default_rendezvous_port = 29501;

/// What the command line of `baton launch` said about the launch; unset
/// fields are read from the environment.
struct launch_flags {
  std::optional<int32_t> rank;            ///< --rank
  std::optional<int32_t> world_size;      ///< --world-size
  std::string master_addr;                ///< --master-addr
  std::optional<uint16_t> rendezvous_port; ///< --rendezvous-port
  std::string hostfile;                   ///< --hostfile FILE
  std::string job_id;                     ///< --job-id
};

/// A host of a hostfile and its slots (processes on it).
struct hostfile_entry {
  std::string host;
  int32_t slots = 1;
};

/// Who this process is and where it meets the others.
struct launch_identity {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string master_addr;       ///< rank 0's host, as the others reach it
  uint16_t rendezvous_port = 0;  ///< where rank 0 gathers the nodes' addresses
  /// The launcher's own port (MASTER_PORT), which baton never binds: torchrun's store
  /// listens there. -1 when not set.
  int32_t launcher_port = -1;
  /// The job's id, the same on every rank and another in every job: --job-id,
  /// else TORCHELASTIC_RUN_ID (torchrun), else SLURM_JOB_ID; "" when none
  /// says it. The rendezvous refuses a rank of another job.
  std::string job_id;
  /// Where each value came from, for the log and errors: "rank 1 of 3 (RANK,
  /// WORLD_SIZE); rank 0 at h0:29501 (MASTER_ADDR, MASTER_PORT + 1)".
  std::string origin;
};

/// Expands a Slurm node list as `scontrol show hostnames` does:
/// `n[01-03,07],gpu5` -> n01 n02 n03 n07 gpu5 (a range keeps the zero padding
/// of its first number; several bracket groups in one name multiply:
/// `r[1-2]-n[1-2]` -> r1-n1 r1-n2 r2-n1 r2-n2). errc::bad_config naming the
/// list and what is wrong (an unclosed bracket, a range that runs backwards,
/// more than max_launch_hosts hosts).
caf::expected<std::vector<std::string>> expand_nodelist(const std::string& list);

/// Reads a hostfile's text: one host a line, `host` or `host slots=N`
/// (Open MPI's `max_slots=N` / `max-slots=N` are accepted and not used), `#`
/// starts a comment. errc::bad_config naming `path`:line for anything else.
caf::expected<std::vector<hostfile_entry>> parse_hostfile(const std::string& text,
                                                          const std::string& path);

/// Reads the hostfile at `path` (bounded, as a topology), then parse_hostfile.
caf::expected<std::vector<hostfile_entry>> load_hostfile(const std::string& path);

/// The longest job id (--job-id, TORCHELASTIC_RUN_ID, SLURM_JOB_ID).
inline constexpr size_t max_job_id = 128;

/// Whether `id` may be a job id: 1 to max_job_id printable characters
/// without spaces (it travels in the rendezvous's one-line registration);
/// "" when it may, else why not.
std::string check_job_id(const std::string& id);

/// When `env` says that this process is one of several copies a launcher
/// started (WORLD_SIZE > 1 from torchrun or PyTorchJob, OMPI_COMM_WORLD_SIZE
/// > 1 from mpirun, the tasks of an srun step: SLURM_STEP_NUM_TASKS, or
/// SLURM_NTASKS inside a step), the variable and its value ("WORLD_SIZE=3");
/// "" otherwise. `baton run` refuses then: each copy would run the whole job.
std::string launched_copies(const std::map<std::string, std::string>& env);

/// Resolves who this process is, each value from the first of: `flags`; the
/// torchrun/PyTorchJob variables; Open MPI's; Slurm's (the first host of
/// SLURM_JOB_NODELIST is rank 0's); the hostfile `hosts` (from
/// --hostfile: the sum of its slots is the world size, its first host rank
/// 0's, and this host's line, found by `hostname` or its first label, gives
/// the rank when nothing else does, plus LOCAL_RANK on a host of several
/// slots). The rendezvous port is --rendezvous-port, else MASTER_PORT + 1 (65534 for 65535),
/// else under Slurm 20000 + SLURM_JOB_ID % 20000 (two jobs on one host do not
/// meet on one port), else default_rendezvous_port. errc::bad_config when a value is
/// missing (naming every place it may come from), not a number, out of range
/// (rank >= world size) or contradicts the hostfile (its slots against the
/// world size of another source), or when a hostfile line of several slots
/// is this host's and no LOCAL_RANK says which. The job id: see
/// launch_identity::job_id (check_job_id).
caf::expected<launch_identity> resolve_launch(const launch_flags& flags,
                                              const std::map<std::string, std::string>& env,
                                              const std::vector<hostfile_entry>& hosts,
                                              const std::string& hostname);

} // namespace runtime
} // namespace baton::actors

#pragma once

// The `baton bench` commands, and what they share.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "actors/runtime/job_result.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/args.hpp"
#include "apps/bench/rounds.hpp"

namespace baton::apps {
inline namespace bench {

using namespace baton::actors;

// -- stopping on a signal -------------------------------------------------------

/// Exit code of a bench stopped by SIGINT or SIGTERM (as of `baton run`).
constexpr int interrupted_exit_code = 130;

/// Whether SIGINT or SIGTERM asked the bench to stop (`interrupted` may be
/// null: never).
bool stop_requested(const std::atomic<bool>* interrupted);

/// The figures a bench writes to `--json FILE`, row by row. FILE is only
/// written at the end, whole (FILE.tmp renamed over it): a bench stopped by a
/// signal writes the rows it finished, with "interrupted": true, or leaves
/// FILE untouched when it finished none.
class bench_figures {
public:
  /// `header`: the bench's settings (an object); `rows`: the key of the
  /// array of rows in it ("results"), made empty if `header` has none.
  bench_figures(std::string path, nlohmann::json header, std::string rows = "results");

  /// Appends one finished row.
  void add(nlohmann::json row) { figures_[rows_].push_back(std::move(row)); }

  /// The figures so far, for a bench that adds fields of its own.
  nlohmann::json& json() { return figures_; }

  /// Rows added so far.
  size_t rows() const { return figures_.at(rows_).size(); }

  /// Ends the bench: writes FILE as above and returns the exit code: 130
  /// when `interrupted`, 1 when FILE cannot be written (the error names it),
  /// else `code`.
  int finish(int code, const std::atomic<bool>* interrupted);

private:
  std::string path_;
  nlohmann::json figures_;
  std::string rows_;
};

/// A fresh work directory for a bench's runs (PREFIX-XXXXXX under $TMPDIR),
/// removed with its owner; nullopt, with the error logged, when it cannot
/// be made.
std::optional<owned_directory> bench_directory(const std::string& prefix);

/// Runs `baton run [topology] --set overrides... flags... --metrics-out` as
/// its own process (so that its peak memory and CPU time are its own), logs
/// to dir/label.log and returns its metrics. An empty `topology` is the
/// built-in default.
/// `flags` with `--link LINK` added when `link` is not empty.
std::vector<std::string> with_link(std::vector<std::string> flags, const std::string& link);

/// Training samples per second of a run after its warm-up (job_result's
/// steady: from its first progress report to its end, as the PyTorch peers
/// time their steps after a warm-up; setup excluded on both sides:
/// processes, data, models); over its whole training time when the run was
/// too short to report progress.
double samples_per_second(const job_result& r);

/// The CPU time this machine's hypervisor gave to others (steal), from
/// /proc/stat: a noisy host makes every ratio noisy, so the benches show it.
class steal_meter {
public:
  steal_meter() : start_(read()) {}
  /// Steal over all CPU time since construction (0 where unknown).
  double fraction() const;

private:
  struct sample {
    int64_t steal = 0;
    int64_t total = 0;
  };
  static sample read();
  sample start_;
};

/// One run of one side, with the host's steal during it.
struct side_run {
  job_result result;
  double steal = 0;
  int32_t round = 1; ///< the --repeat round it ran in (1, 2, ...)
};

/// Called about every 100 ms while a child runs (baton compare's progress).
using while_running = std::function<void()>;

/// Runs `argv` (argv[0] an absolute path) as a child process logging to
/// `log`; an error naming `what` (default argv[0]) with the log's tail when
/// it exits with a non-zero code, errc::interrupted when `interrupted` is set
/// first (the child is stopped).
caf::expected<void> run_process(const std::vector<std::string>& argv, const std::string& log,
                                const std::atomic<bool>* interrupted,
                                const while_running& tick = {}, const std::string& what = "");

/// run_process of `baton args...` (this executable).
caf::expected<void> run_command(std::vector<std::string> args, const std::string& log,
                                const std::atomic<bool>* interrupted,
                                const while_running& tick = {});

caf::expected<job_result> run_side(const std::string& topology,
                                   const std::vector<std::string>& overrides,
                                   std::vector<std::string> flags, const std::string& dir,
                                   const std::string& label, const std::atomic<bool>* interrupted,
                                   const while_running& tick = {});

/// run_side for one row of a bench's table, with the host's steal during the
/// run. A run that fails (not stopped by a signal) is printed as "ROW failed:
/// WHY", ROW `width` wide, and sets `code` to 1; nullopt then and when stopped.
std::optional<side_run> run_row(const std::string& topology,
                                const std::vector<std::string>& overrides,
                                std::vector<std::string> flags, const std::string& dir,
                                const std::string& name, const std::atomic<bool>* interrupted,
                                const std::string& row, int width, int& code);

/// The command run_side runs, as a user types it ("baton run FILE --set
/// K=V ... --metrics-out DIR/LABEL.json"): what reproduces a row.
std::string side_command(const std::string& topology, const std::vector<std::string>& overrides,
                         const std::vector<std::string>& flags, const std::string& dir,
                         const std::string& label);

/// The run with the median training samples/s of `runs` (not empty; sorts them).
const side_run& median_run(std::vector<side_run>& runs);

/// `rate` over `limit` ("of limit"); 0 when the limit is unknown (0).
double of_limit(double rate, double limit);

/// Each run's round and samples/s (for ratios_by_round, apps/bench/rounds.hpp).
std::vector<round_rate> rates_by_round(const std::vector<side_run>& runs);

/// "0.76" or "-" (0: unknown), `width` wide: an "of limit" or ratio cell.
std::string ratio_cell(double ratio, int width, const char* suffix = "");

/// `bytes` in MiB with two decimals: "12.34".
std::string mib(double bytes);

// -- the PyTorch peers ------------------------------------------------------------
//
// Plain PyTorch processes doing a bench's work (tests/peers/*.py), run beside
// the baton sides in the same bench so that their figures share one window
// of the host (docs/benchmarks.md).

/// The allocator setting every peer runs with: glibc's mmap threshold,
/// arenas and trimming set as baton sets them with mallopt, and its heap in
/// transparent huge pages (the strongest peer on these VMs: DDP gloo 2x1 on
/// the mlp 900 -> 933-964 samples/s with hugetlb=1; on 2026-12-02 PyTorch 2
/// threads, mlp b256, 1,024-1,032 against 1,000-1,010, its huge pages' first
/// touch, 4.5 s of system time, before the timed steps). baton's own heap no
/// longer asks for huge pages (apps/tuned_heap.cpp): a run pays that first
/// touch in its wall time.
inline constexpr const char* peer_glibc_tunables =
  "glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1073741824:"
  "glibc.malloc.hugetlb=1";

/// A python3 that imports torch: $BATON_PEER_PYTHON, else /usr/bin/python3,
/// else /usr/local/bin/python3; "" when none can. Asked once per process
/// (importing torch takes a second or more), logging to DIR/python-with-torch.log.
const std::string& peer_python(const std::string& dir);

/// One run of a peer: the JSON line it printed, or why there is none.
struct peer_run {
  nlohmann::json figures = nlohmann::json::object(); ///< the peer's line ({} when none)
  /// "" when it ran; else why not: "skipped: no python3 with torch",
  /// "failed: WHY" (with its log's tail), "interrupted".
  std::string skipped;
  double steal = 0;    ///< the host's steal during the run
  std::string command; ///< what reproduces it, as a user types it

  bool ran() const { return skipped.empty(); }
  /// The peer's "samples_per_second" (0 when it did not run).
  double samples_per_second() const;
  /// The peer's "seconds": its timed work (0 when it did not run).
  double seconds() const;
  /// {"label": ..., "command": ..., "steal_fraction": ..., the peer's figures
  /// or "skipped": why}, for a bench's --json.
  nlohmann::json to_json(const std::string& label) const;
};

/// Runs `BATON_SOURCE_DIR/tests/peers/SCRIPT args...` with peer_python()
/// and GLIBC_TUNABLES=peer_glibc_tunables, logging to DIR/LABEL.log, and
/// reads the last line of its output that is a JSON object. Never fails the
/// bench: a missing python3-torch or a failed peer is in `skipped`.
peer_run run_peer(const std::string& script, const std::vector<std::string>& args,
                  const std::string& dir, const std::string& label,
                  const std::atomic<bool>* interrupted);

/// What `of limit`, `vs PT 2t` and the PyTorch rows mean: the legend's lines.
const char* peers_legend();

/// The peer run with the median samples/s of those of `runs` that ran
/// (else the first; `runs` not empty).
const peer_run& median_peer(std::vector<peer_run>& runs);

/// The round and samples/s of each of a peer's runs that ran; `runs` holds
/// one run per round, in round order (a skipped or failed one included).
std::vector<round_rate> rates_by_round(const std::vector<peer_run>& runs);

/// `baton bench transfer` options.
struct bench_request {
  int32_t heads = 3;
  bool quick = false;
  std::string json_out;
  std::vector<std::string> backbones{"convnet", "convnet_wide"};
  std::vector<std::string> overrides;
  int32_t local_nodes = 0; ///< run the shared side over N local node processes
  std::string link;        ///< --link RATE[,DELAY] for those nodes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// Runs the shared-backbone job and the separate baseline, one after the
/// other, for each backbone; prints wall times, ratios, peak memory and bytes
/// between actors; writes the figures to json_out if set. Returns the exit code.
int bench_transfer(const bench_request& r);

/// `baton bench pipeline` options.
struct bench_pipeline_request {
  bool quick = false;
  std::string json_out;
  std::vector<std::string> models{"convnet", "resnet18"};
  std::vector<std::string> schedules{"gpipe", "1f1b-flush", "1f1b"};
  int32_t repeat = 1; ///< runs per side, interleaved; the median is shown
  std::string link;   ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  bool embedded = false; ///< the stages in the bench's run process instead of 2 node processes
  int32_t microbatches = 4; ///< per minibatch of 128 samples: 2, 4 or 8
  const std::atomic<bool>* interrupted = nullptr;
};

/// For each model: profiles it, plans 2 stages (`baton plan --straight`),
/// then runs (a) the local loop with one compute thread and (b) the 2-stage
/// pipeline over two node processes with one compute thread each, under each
/// schedule; prints samples/s, the ratio to (a), per-stage utilisation, the
/// measured bubble fraction next to gpipe's theoretical one, the actor and
/// wire overhead (CPU beyond the stages' computations) and the extra CPU of
/// all processes. Returns the exit code.
int bench_pipeline(const bench_pipeline_request& r);

/// `baton bench faults` options.
struct bench_faults_request {
  bool quick = false;
  std::string json_out;
  std::string kill_at = "half"; ///< step of the SIGKILL: "half" of the run, or a number
  std::string link;             ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// Runs the same short gpipe pipeline over 3 local node processes twice,
/// fault-free and with the node of stage 0 SIGKILLed mid-run; prints both
/// wall times, detection and recovery times, the step restored and whether
/// the final weights and exactly-once counts match. Returns the exit code.
int bench_faults(const bench_faults_request& r);

/// `baton bench data-parallel` options.
struct bench_data_parallel_request {
  bool quick = false;
  std::string json_out;
  std::string model = "mlp";  ///< mlp | convnet | resnet18
  int32_t workers = 2;        ///< W workers, each on its own node process
  int64_t batch = 64;         ///< samples per worker per step
  int64_t train_limit = 16384; ///< training samples (one epoch)
  int32_t shards = 2;         ///< S of the parameter-server rows
  int32_t sync_every = 4;     ///< L of the local-SGD row
  int32_t staleness = 2;      ///< max_staleness of the bounded-staleness row
  /// ring, ring-serial, ps, local-sgd, ps-stale (empty: all)
  std::vector<std::string> sides;
  std::vector<std::string> overrides;
  std::string link;           ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  int32_t repeat = 1;         ///< rounds of every side, interleaved; a row is their median
  const std::atomic<bool>* interrupted = nullptr;
};

/// Runs (a) the one-process loop with one compute thread and the global
/// batch, then W workers on W node processes with one compute thread each
/// under (b) the ring, (c) the parameter server, (d) local SGD, (e) the
/// parameter server with bounded staleness; prints samples/s, the ratio to
/// (a), scaling efficiency, each worker's time split per step, the overlap,
/// bytes per step next to the theory. Returns the exit code.
int bench_data_parallel(const bench_data_parallel_request& r);

/// `baton bench freezing` options.
struct bench_freezing_request {
  bool quick = false;
  std::string json_out;
  int32_t epochs = 3;  ///< fine-tuning epochs (the cache serves from the second)
  int64_t batch = 32;  ///< samples per worker per step
  std::string link;    ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// Pretrains the convnet on groups4, then fine-tunes it on all10 with W = 2
/// workers on 2 node processes: fully, frozen after each convnet group,
/// frozen to pool3 with the feature cache, adaptively, adaptively with the
/// cache; prints samples/s, the speedup over full fine-tuning, each
/// worker's time per epoch split into forward, backward, exchange and step,
/// bytes per step, test accuracy and the adaptive decisions. Returns the
/// exit code.
int bench_freezing(const bench_freezing_request& r);

/// `baton bench ist` options.
struct bench_ist_request {
  bool quick = false;
  std::string json_out;
  int32_t workers = 2;        ///< W workers (IST, local SGD, ring), each on its own node process
  std::string link;           ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  double target = 0.85;       ///< test accuracy whose time is compared
  int32_t epochs = 10;        ///< epoch limit of every run
  int64_t batch = 64;         ///< samples per worker per step
  int64_t train_limit = 0;    ///< training samples (0: all 60000)
  int64_t test_limit = 10000; ///< test samples
  int32_t local_steps = 8;    ///< IST's L and local SGD's sync_every
  double lr = 0.01;           ///< plain SGD (momentum 0) in every run
  /// Hidden widths of each network benched: 2-layer and 3-layer.
  std::vector<std::vector<int64_t>> networks{{4096}, {4096, 4096}};
  const std::atomic<bool>* interrupted = nullptr;
};

/// For each network: (a) IST (configs/ist.yaml), (b) data-parallel local SGD
/// with sync_every = IST's local steps, (c) the data-parallel ring every
/// step, all on IST's network (data_parallel.model: ist_mlp) with W workers
/// on W node processes and the same link; prints each run's accuracy curve
/// over time, its time to the target (or its best accuracy), bytes per
/// worker per round next to the formula, and the speedups of (a) over (b)
/// and (c). Returns the exit code.
int bench_ist(const bench_ist_request& r);

// -- the commands ---------------------------------------------------------------

/// `baton bench NAME [flags]`: reads its flags from `a` (an error names the
/// bad one: exit 2) and runs the bench, which stops when `interrupted`.
struct bench_command {
  std::string name;
  int (*run)(args& a, const std::atomic<bool>* interrupted);
};

/// Every bench, by name: what `baton bench` chooses from.
const std::vector<bench_command>& all_benches();

int bench_transfer_command(args& a, const std::atomic<bool>* interrupted);
int bench_pipeline_command(args& a, const std::atomic<bool>* interrupted);
int bench_data_parallel_command(args& a, const std::atomic<bool>* interrupted);
int bench_freezing_command(args& a, const std::atomic<bool>* interrupted);
int bench_ist_command(args& a, const std::atomic<bool>* interrupted);
int bench_faults_command(args& a, const std::atomic<bool>* interrupted);

} // namespace bench
} // namespace baton::apps

#pragma once

// The topology file: what `baton run` reads. YAML, validated strictly: an
// unknown key, a wrong type, a missing file or a value out of range is an
// error naming the file, the line and what was expected (errc::bad_config).
// See configs/transfer.yaml for every key with its meaning.

#include <any>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/net/tls.hpp"
#include "model/core/layer_tie.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace config {

struct job_schema;

// -- limits ---------------------------------------------------------------------
// A topology larger than these is refused with the limit in the error (docs/configuration.md
// "Limits"): every entry is an actor, a thread budget or a
// connection, and a typo or a hostile file must not become a million of them.
// A strategy's own lists have their limits in its folder.

/// The largest topology file: 256 KiB (detail::max_config_bytes).
inline constexpr size_t max_topology_bytes = size_t{256} << 10;
/// Tasks (`tasks`): label maps.
inline constexpr size_t max_tasks = 64;
/// Nodes (`nodes`): one connection each.
inline constexpr size_t max_nodes = 256;
/// Injected faults (`faults`).
inline constexpr size_t max_faults = 64;

/// A node process the coordinator can spawn actors on.
struct node_address {
  std::string name;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string where; ///< "file:line" of its entry (or the --set); empty for local nodes
};

/// Backbone pre-training settings (`backbone.pretrain`): how the workload's
/// starting weights (`backbone.checkpoint`) are made when they are missing.
struct backbone_pretrain_spec {
  std::string task;            ///< a task name from `tasks`; default: the workload's task
  int32_t epochs = 1;
  int64_t train_limit = 20000; ///< first N training samples
  model::optimizer_spec optimizer;
  /// `if_missing: pretrain`: a run whose backbone.checkpoint does not exist
  /// pre-trains it first (the shipped configs, so that a fresh clone runs);
  /// `error` (the default): the run is refused with a hint to run `baton
  /// pretrain`, so that a mistyped path never trains from scratch unnoticed.
  bool if_missing_pretrain = false;
  std::string where; ///< file:line of the `backbone.pretrain` section ("" when not given)
};

/// Runtime settings (`runtime`).
struct runtime_spec {
  int32_t window = 4;             ///< credit window per tensor edge
  int32_t scheduler_threads = 2;  ///< CAF scheduler threads, 1..max_scheduler_threads (64)
  /// Torch threads per actor of the plan that computes (a stage, a worker,
  /// a head), 1..max_compute_threads (256): `runtime.compute_threads` (older
  /// files: `runtime.stage_threads`). A strategy may give some of its actors
  /// a budget of their own, read into its own settings.
  int32_t compute_threads = 1;
  /// Whether the topology set compute_threads. Unset, it is derived from the
  /// cores (derive_thread_budgets), and only budgets a user asked for are
  /// warned about when they exceed them (job_plan::threads_asked_by).
  bool compute_threads_asked = false;
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds connection_timeout{2000};
  std::chrono::milliseconds request_timeout{10000}; ///< wiring and other requests
  /// A node's start of one actor: a source reads its whole dataset then, so
  /// this bound is longer than request_timeout; a node lost meanwhile is
  /// found at this bound (requests to a dead node fail at their deadline).
  std::chrono::milliseconds start_timeout{300000};
  int32_t progress_every = 20;    ///< heads report progress every N steps
  /// Trainable actors checkpoint after every N optimiser steps; 0: never
  /// (a restart then begins from the initial weights).
  int32_t checkpoint_every = 0;
  std::string checkpoint_dir;     ///< "": a fresh directory under the system's temp dir
  int32_t max_restarts = 3;       ///< restarts after failures before giving up
  /// No message from any actor for this long: the run is stuck (a lost
  /// message), which fails it, or restarts it when it recovers.
  std::chrono::milliseconds stall_timeout{300000};
  /// A job that cannot recover a lost node (no checkpoints) waits this long
  /// for a node that is silent while its connection stays open (slow,
  /// SIGSTOPped) before it counts as lost; one that recovers gives up after
  /// connection_timeout (actors/runtime/node_watch.hpp).
  std::chrono::milliseconds slow_node_timeout{120000};
  /// Stop the run (as at the workload's target_accuracy: every actor
  /// reports what it has)
  /// once it has trained this many seconds; 0: no time budget. `baton
  /// compare --budget` sets it, so that a strategy stopped at its budget
  /// still writes its metrics.
  double stop_after_seconds = 0;
  tls_settings tls;               ///< `runtime.tls` (or --tls-cert, --tls-key, --tls-ca)
  /// With `--local-nodes` and no `--link`: large tensors between the node
  /// processes and this one go through /dev/shm (false: through the
  /// loopback sockets, as between hosts).
  bool shared_memory = true;
};

/// An injected fault (`faults:` or `--fault`): see docs/faults-and-recovery.md.
struct fault_spec {
  std::string kind;   ///< throw | kill_node | stop_node | delay | drop | chaos
  std::string actor;  ///< throw: a trainable actor of the job's plan
  std::string node;   ///< kill_node, stop_node: the node
  int64_t at_step = -1;              ///< when the job has made this many steps ...
  std::chrono::milliseconds after{-1}; ///< ... or this long after training started
  std::chrono::milliseconds stopped{0}; ///< stop_node: how long the node stays stopped
  std::string from, to;                ///< delay, drop: the edge (sender -> receiver)
  std::chrono::milliseconds delay{0};  ///< delay: added to every message on the edge
  double rate = 0;                     ///< chaos: probability of a fault per step
  uint64_t seed = 1;                   ///< chaos: its random choices
  std::string where;  ///< "file:line" or "--fault ..."
};

/// What is trained, whatever the strategy: the data, the model and its
/// starting weights, the tasks (label maps) and the task a one-task job
/// trains, the batch plan and epochs. The same workload runs under another
/// strategy by changing `job:` and its section alone.
struct workload {
  std::string file;          ///< path it was read from ("<embedded>" for defaults)
  /// The YAML text it was parsed from, before the `--set` overrides: read
  /// once, it is what a run record keeps (never the file read again).
  std::string text;
  uint64_t seed = 42;

  // -- data ------------------------------------------------------------------
  /// The `data:` section's dataset: kind, files, shape, classes,
  /// normalisation, limits, memory budget (docs/data.md); its seed is `seed`.
  model::data_spec data;
  /// [C, H, W] of the data's samples: read from its files' headers at parse
  /// time (or declared with data.shape where a listed node reads them).
  std::vector<int64_t> sample_shape{1, 28, 28};
  /// A training epoch's samples (after data.train_limit, less the validation
  /// samples) from the headers read where the topology was parsed: by the
  /// data's reader where this process or its local nodes read the files, by
  /// a job that counts a schedule's steps where listed nodes do
  /// (actors/modes/schedule_length.hpp); nullopt where nothing read them.
  std::optional<int64_t> training_samples;
  /// The data's headers as the data's reader read them where the topology
  /// was parsed (this process or its local nodes read the files; a
  /// synthetic set's from its keys): the samples' shape, the classes and
  /// both splits' samples, for whatever needs them after the parse (a
  /// prediction's epoch and evaluation, a launch's declared data) without
  /// reading the files again; nullopt where listed nodes read the files.
  std::optional<model::data_header> data_header;
  model::batch_plan plan;    ///< batch_size, microbatches, epochs, seed

  // -- model -------------------------------------------------------------------
  /// name convnet | convnet_wide | resnet18 | torchscript (a strategy may
  /// choose another, e.g. job: data-parallel's model); in_channels,
  /// in_height, in_width: the data's samples' [C, H, W]
  model::model_spec backbone;
  /// The backbone's layers that share a parameter (tied weights, a
  /// TorchScript backbone's), found when it is built at parse time: a
  /// strategy that cuts the layers into parts keeps each tie in one part.
  std::vector<model::layer_tie> backbone_ties;
  /// The width of the backbone's features (what a head takes), found with
  /// its layers for a job that reads it (job_schema::
  /// reads_backbone_features; model::layer_listing::features); 0 when it
  /// cannot be measured, the reason in backbone_features_error (a job that
  /// needs the width refuses it), or for another job.
  int64_t backbone_features = 0;
  std::string backbone_features_error;
  std::string checkpoint;      ///< pretrained weights; resolved against the file's dir
  std::string checkpoint_where; ///< file:line of `backbone.checkpoint` ("" when not given)
  backbone_pretrain_spec pretrain;
  /// The workload's `optimizer:` section (every strategy's, over which
  /// backbone.pretrain.optimizer and heads[].optimizer override); nullopt
  /// when not given (each strategy's default, or its older key).
  std::optional<model::optimizer_spec> optimizer;
  std::string optimizer_where; ///< file:line of `optimizer:` ("" when not given)

  // -- tasks -------------------------------------------------------------------
  std::vector<model::task> tasks;
  /// `task:`: the task a job that trains one model trains; default
  /// `backbone.pretrain.task`, else the first of `tasks`.
  std::string task;

  /// `target_accuracy` (older files: `runtime.stop_at_accuracy`): the run
  /// stops after the epoch at which every result (head) has reached this
  /// test accuracy (a fraction); 0: it runs every epoch.
  double target_accuracy = 0;

  /// `save` (best | last; default best with data.validation, else last)
  /// and `early_stopping.patience` (0: off): which epoch --save-model
  /// writes and when the run stops, by validation accuracy.
  model::selection_spec selection;

  const model::task* find_task(const std::string& name) const;
};

/// How it is trained: `job:` and its section, parsed by its mode.
struct strategy {
  /// `job:`; when absent, the first of the jobs it was parsed with.
  std::string job;
  /// That job's schema, from the list the topology was parsed with (which
  /// outlives it).
  const job_schema* schema = nullptr;
  /// The job's own settings, as its mode's `job_schema::parse` returned them
  /// (a struct of the mode's, e.g. data_parallel::section_spec): the parser knows
  /// no mode, and a mode reads its own with std::any_cast.
  std::any mode_spec;
  /// What the job trains where it is not the backbone, and the optimizer
  /// that steps it where it is not the workload's, as its parse settles
  /// them (IST's network and widths; data-parallel's and IST's optimizer
  /// section): what `baton profile`, predict and compare time (modes'
  /// trained_model_of).
  std::optional<model::model_spec> trained_network;
  std::optional<model::optimizer_spec> trained_optimizer;
};

/// Where it runs: the nodes, the runtime's limits (with TLS) and the
/// injected faults.
struct cluster {
  std::vector<node_address> nodes; ///< empty = embedded (all actors in one process)
  std::string source_node;     ///< `data.node`: the source's node; empty when embedded
  /// Bytes/s of the link between its nodes when the run emulates one
  /// (`--link`), for the planners; 0 when not known (their default).
  double link_bandwidth = 0;
  runtime_spec runtime;
  std::vector<fault_spec> faults;

  bool embedded() const { return nodes.empty(); }
  /// Whether a failure restarts the job from its checkpoints (or from the
  /// start): with checkpoints or injected faults, and max_restarts > 0.
  bool recovers() const {
    return (runtime.checkpoint_every > 0 || !faults.empty()) && runtime.max_restarts > 0;
  }
};

/// A parsed, validated topology: a workload, a strategy and a cluster.
struct topology : workload, strategy, cluster {};

/// Reads and validates a topology file. `overrides` are "dotted.key=value"
/// strings from `--set`, applied before validation (a value is parsed as
/// YAML, so `--set data.batch_size=32` works). `jobs` are the training modes' schemas
/// (all_job_schemas(), actors/modes/job_schemas.hpp, which also has these
/// functions without it); `job:` names one of them.
caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const std::vector<job_schema>& jobs);

/// Same, from YAML text; `name` is used in error messages in place of a path.
caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides,
                                       const std::vector<job_schema>& jobs);

/// Same as load_topology, from `yaml_text` that the file `path` held (its
/// relative paths are relative to `path`'s directory): `--resume` parses the
/// text a run was started with, not the file as it is now.
caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides,
                                          const std::vector<job_schema>& jobs);

/// Every scalar of the topology document after `overrides`, by dotted path
/// ("data.batch_size" -> "64", "tasks.0.labels.3" -> "3"), unvalidated: what
/// a run was configured with, for comparing two runs. `name` labels errors.
caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides, const std::vector<job_schema>& jobs);

/// The topology with `nodes` replaced by `count` local nodes n1..nN (ports
/// filled in later). Its actors are placed on them when its plan is made
/// (place_round_robin, actors/runtime/plan_checks.hpp): those placed on a node
/// of another name are placed again.
topology with_local_nodes(topology t, int32_t count);

} // namespace config
} // namespace baton::actors

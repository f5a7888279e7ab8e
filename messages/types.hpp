#pragma once

// The C++ form of everything that crosses a process boundary. Inside one
// process these structs travel in CAF messages as they are (tensors are shared,
// never copied); across processes their `inspect` overloads (codec.hpp) write
// and read the Cap'n Proto schema in messages/baton.capnp.
//
// Every struct has an `invalid` member: when bytes received from a peer cannot
// be decoded (bad shape, unknown dtype, unknown schema version, oversize...),
// the deserializer does not fail the CAF message (which CAF would drop
// silently) but delivers the struct with `invalid` set, so that the receiving
// actor can log, report and refuse it. All other members are then unspecified.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/error.hpp>

namespace baton::messages {

/// Version of messages/baton.capnp written by this build; readers refuse others.
inline constexpr uint32_t schema_version = 4;

/// Default limit of one encoded message (and of one tensor), in bytes.
inline constexpr uint64_t default_max_message_bytes = uint64_t{64} << 20;

/// The labels of one task for every sample of a microbatch.
struct task_labels {
  std::string task;  ///< task name as in the topology
  at::Tensor values; ///< int64 [batch]
};

/// A microbatch of samples (or of activations, after a stage) and its labels.
struct microbatch {
  int64_t id = -1;            ///< unique and increasing within a run
  int64_t step = 0;           ///< minibatch (optimizer step) index in the run
  int32_t epoch = 0;          ///< epoch, from 0
  int32_t index_in_step = 0;  ///< position within its minibatch
  int32_t step_size = 1;      ///< number of microbatches in its minibatch
  bool eval = false;          ///< test-split data: evaluate, do not train
  bool validation = false;    ///< with eval: the validation samples, not the test split
  int64_t weight_version = -1;///< weight version used by the first stage (-1: none)
  at::Tensor payload;         ///< inputs or activations, batch first
  std::vector<task_labels> labels; ///< labels of every task of the job
  /// The data set's sample id of every payload row (of the test split when
  /// `eval`), as the source cut them: a frozen stage's feature cache is keyed
  /// by them. Empty: not known (not cut from a data set); otherwise exactly
  /// one id >= 0 per payload row, or the message is invalid.
  std::vector<int64_t> samples;
  /// The input of the previous stage's last layer, whose weight gradient the
  /// receiving stage computes (`weight_gradient: next`); undefined otherwise.
  at::Tensor boundary_input;
  caf::error invalid;         ///< set when received bytes could not be decoded
};

/// A gradient flowing backwards through a pipeline.
struct gradient {
  int64_t microbatch_id = -1;
  int64_t step = 0;
  int64_t weight_version = -1;
  at::Tensor value;
  /// The receiver's last layer's weight gradients (weight, then bias),
  /// computed by the sender (`weight_gradient: next`) and sent after the
  /// microbatch's gradient, in a message of their own with no `value` (the
  /// weight half); empty otherwise.
  std::vector<at::Tensor> weight_gradients;
  caf::error invalid;
};

/// Tensors that trainable actors exchange as a whole: a replica's gradient
/// sum for one step of its replica group, or a stage's weights.
struct tensor_set {
  std::string kind;        ///< "gradients" | "weights"
  std::string from;        ///< sending actor
  int32_t replica = 0;     ///< sender's index in its replica group
  int64_t step = 0;        ///< the step (group round) the tensors belong to
  int32_t step_size = 0;   ///< microbatches in that step
  std::vector<at::Tensor> tensors;
  caf::error invalid;
};

/// A credit returned by a receiver: `slots` more messages may be sent.
struct credit {
  int64_t microbatch_id = -1; ///< the message whose slot was freed (-1: none)
  int32_t slots = 1;
  caf::error invalid;
};

/// What a control message asks for or announces.
enum class control_kind : uint8_t {
  start = 0,     ///< begin emitting (sent to a source)
  epoch_end,     ///< all microbatches of `epoch` (train and eval) were sent;
                 ///< value: minibatches (steps) sent so far in the run
  end_of_stream, ///< no more microbatches will follow; value: as for epoch_end
  shutdown,      ///< stop now (text says why)
};

/// A control message; travels on the same edges as microbatches, in order.
struct control {
  control_kind kind = control_kind::start;
  int32_t epoch = 0;
  int64_t value = 0;
  std::string text;
  caf::error invalid;
};

/// Traffic on one edge, counted by its sender.
struct edge_stats {
  std::string from;
  std::string to;
  int64_t messages = 0;
  int64_t bytes = 0; ///< tensor payload bytes plus label bytes
};

/// One epoch of a head (or of any trainable actor).
struct epoch_result {
  int32_t epoch = 0;
  double train_loss = 0;    ///< mean training loss over the epoch
  double test_accuracy = 0; ///< fraction in [0, 1] on the test split
  int64_t samples = 0;      ///< training samples seen in the epoch
  /// Fraction in [0, 1] on the samples held out for validation
  /// (data.validation); -1: the run has none.
  double validation_accuracy = -1;
  /// Test and validation samples the two accuracies cover (0: not counted):
  /// a result group's accuracy pools its members' by them.
  int64_t evaluated = 0;
  int64_t validated = 0;
};

/// One slice of an actor's schedule (for `--trace`): what it did, when, on
/// which microbatch and with which weight version.
struct trace_event {
  std::string kind;            ///< forward, backward, step, send, wait, eval, allreduce
  int64_t start_us = 0;        ///< microseconds since the Unix epoch (system clock)
  int64_t duration_us = 0;
  int64_t microbatch_id = -1;  ///< -1: not about one microbatch (a step)
  int64_t weight_version = -1; ///< version used (forward/backward) or made (step)
};

/// A named figure of an actor's report that only some roles measure (a
/// data-parallel worker's time split, a cache's hits): the metrics JSON lists
/// them under the actor's "figures".
struct named_figure {
  std::string name; ///< snake_case, with its unit: "backward_seconds", "cache_hits"
  double value = 0;
};

/// What an actor reports to the coordinator at the end of a run (and per epoch).
struct actor_report {
  std::string actor;          ///< actor name from the topology
  std::string role;           ///< source, stage, head
  std::string task;           ///< task name (heads), else empty
  std::string node;           ///< node the actor ran on
  double busy_seconds = 0;    ///< time spent computing
  double idle_seconds = 0;    ///< time alive but not computing
  int64_t samples = 0;        ///< training samples processed
  double train_loss = 0;      ///< mean training loss of the last epoch
  double test_accuracy = 0;   ///< test accuracy after the last epoch
  std::string weights_digest; ///< SHA-256 hex of the final weights (trainable actors)
  std::vector<edge_stats> edges;
  std::vector<epoch_result> epochs;
  double bubble_seconds = 0;  ///< idle while it had work in flight (pipeline stages)
  std::vector<trace_event> trace; ///< its schedule, when the run is traced
  double compute_cpu_seconds = 0; ///< its thread's CPU in computations (stages, workers)
  double process_cpu_seconds = 0; ///< its process's CPU since its first work
  std::vector<named_figure> figures; ///< role-specific figures, in the actor's order
  /// Role-specific events, one JSON object per entry (an adaptive freezing
  /// decision, say); the metrics JSON lists them, parsed, under "events".
  std::vector<std::string> events;
  caf::error invalid;
};

/// Resources and usage of one node process.
struct node_report {
  std::string name;
  int64_t peak_rss_bytes = 0;
  double cpu_seconds = 0;   ///< user + system CPU time of the process
  int32_t cores = 0;        ///< hardware threads of the machine
  int64_t memory_bytes = 0; ///< physical memory of the machine
  caf::error invalid;
};

/// Asks a node's spawner to start one actor.
struct spawn_request {
  std::string role; ///< a registered actor type: source, stage, head, ...
  std::string name; ///< actor name from the topology
  std::string spec; ///< role-specific settings, YAML text
  caf::error invalid;
};

/// Live progress of a trainable actor, sent every few steps.
struct progress {
  std::string actor;
  int32_t epoch = 0;
  int64_t samples = 0; ///< training samples processed so far in the run
  double loss = 0;     ///< mean loss over the samples since the last progress
  caf::error invalid;
};

} // namespace baton::messages

#pragma once

// What the topology parser asks of a training mode. The parser reads the
// workload (data, backbone, tasks, task) and the cluster (runtime, nodes,
// faults); each mode gives a job_schema for what is its own: its section
// and the keys it adds to the common sections, read into its own settings
// struct. actors/modes/job_schemas.cpp lists them; the parser takes that
// list and names no mode. What its actors are, where they run and which
// faults may name them is read from its plan (actors/modes/mode.hpp).

#include <any>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/config/topology.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace config {

/// A job's length in the steps its faults count, when it is known as the
/// topology is read: a fault at a step past its end would never fire, and is
/// refused (one check, topology.cpp, for every mode).
struct job_length {
  int64_t steps = 0;
  std::string how;           ///< "2 epochs x 938 minibatches of 64 from 60000 training samples"
  std::string step = "step"; ///< what one of its steps is called ("round")
};

/// "1 epoch", "3 epochs": how a job_length's `how` begins.
inline std::string epochs_text(int64_t epochs) {
  return std::to_string(epochs) + (epochs == 1 ? " epoch" : " epochs");
}

/// Something a job's settings cannot recover from, said as data: the
/// parser refuses it where the run asks for recovery (`runtime.
/// checkpoint_every`, else `faults`), at `path` ("" : at that key itself),
/// as "<the key> <why>".
struct recovery_refusal {
  std::string path; ///< dotted, as written ("data_parallel.max_staleness"); "" for none
  std::string why;  ///< "with max_staleness 2: job: data-parallel recovers ..."
};

/// What a job's `parse` reads: its settings struct (kept as
/// topology::mode_spec) and what the parser checks against the sections it
/// reads after it (the runtime and the faults).
struct job_reading {
  std::any settings;
  /// Its length in the steps its faults count when they are not the common
  /// `epochs x minibatches` (data-parallel: steps of its W workers together;
  /// IST: rounds): `own_length` is set and `length` is nullopt where the
  /// data's size is not known here.
  bool own_length = false;
  std::optional<job_length> length;
  /// What recovery (checkpoints, faults) cannot be asked of these settings.
  std::vector<recovery_refusal> refuses_recovery;
  /// Why delays and drops on credit edges (`faults` of kind delay, drop)
  /// cannot be asked ("" : they can): its actors exchange on no credit edge.
  std::string refuses_edge_faults;
};

/// One training mode, as the topology parser sees it (`job: NAME`).
struct job_schema {
  std::string name; ///< the value of `job:`
  /// Its own top-level section, read with `job: NAME` only and refused with
  /// any other; "" for none.
  std::string section;
  /// The keys of its maps by path pattern ("pipeline.stages.*": a list
  /// entry), and the paths that are lists: validation and `--set` read them
  /// as they read the common sections'. Keys at a path of the common
  /// sections ("": the top level, "backbone") add to them: they are its own,
  /// and another job that does not list them too refuses them by name.
  std::map<std::string, std::vector<std::string>> keys;
  std::vector<std::string> lists;
  /// Who reads its keys, for that refusal: "jobs that run the backbone
  /// frozen" ("" says "job: NAME" only).
  std::string readers;
  /// Whether its own section names the model it trains when `backbone.model`
  /// is absent (data-parallel's `data_parallel.model`, IST's `ist.model`):
  /// the default backbone is then not built to read layer names the job
  /// never uses (a convnet refuses images under 8x8 that an mlp takes).
  bool own_model = false;
  /// Whether it reads the backbone's output width (topology::
  /// backbone_features: transfer's heads take it): found with the layers
  /// for its jobs only (a TorchScript backbone's by a probe forward pass).
  bool reads_backbone_features = false;
  /// Where its actors read the data's files when nodes are listed, said in
  /// the error that asks the data section to declare what they hold: "each
  /// worker reads its shard of them on its own node" ("": the source's
  /// node, data.node, reads them).
  std::string reads_data_on;
  /// Which models it trains when not every backbone, said where a workload
  /// trains another ("pipeline splits backbone.model: convnet, ..."); "":
  /// any.
  std::string trains;
  /// Keys it does not read, refused with its own reason before the backbone
  /// is read, by dotted path: another job's ("backbone.split" under job:
  /// pipeline) or a common one ("backbone.model" under job: ist, which
  /// trains ist.model): "'backbone.split' is auto, but " + reason.
  std::map<std::string, std::string> refusals;
  /// Reads its section and checks what it needs of the common ones, right
  /// after the backbone (`layers`: the backbone's layer names), and returns
  /// its settings struct, which the parser keeps as topology::mode_spec, with
  /// its length and what it refuses of recovery (it may also settle workload
  /// keys the job decides, e.g. the model it trains). Null: a job planned but
  /// not implemented yet, refused by name.
  job_reading (*parse)(const detail::field& root, const std::vector<std::string>& layers,
                       topology& t) = nullptr;
};

namespace detail {

/// Checks that `f` is a map of the keys the schema lists for its path (the
/// common sections' and those of the jobs it is parsed with), none twice;
/// an empty section counts as a map without keys.
void check_section(const field& f);

/// A `node:` or `place:` entry: it must name a node listed under `nodes`.
std::string read_node(const field& f, const std::vector<node_address>& nodes);

/// The keys of an optimizer section (the workload's `optimizer:`, a part's
/// override): torch.optim's names (docs/configuration.md).
const std::vector<std::string>& optimizer_keys();

/// An optimizer section over `optimizer` (the keys it gives replace those
/// fields; its other keys are the section's own, checked by check_section).
/// Refuses, naming the file and line, a key of another optimizer or
/// schedule (momentum with adam, betas with sgd, gamma without step) and
/// what model::check_optimizer refuses.
model::optimizer_spec read_optimizer(const field& section, model::optimizer_spec optimizer);

/// A budget of torch threads per actor (`runtime.compute_threads`, or one
/// a strategy adds to the runtime section for some of its actors): 1 to
/// max_compute_threads.
int32_t read_compute_threads(const field& f);

/// A `task:` entry: it must name a task listed under `tasks`; the task.
const model::task& read_task(const field& f, const workload& w);

/// "at most 64 nodes": a limit, as list errors state it.
std::string at_most(size_t most, const std::string& what);

} // namespace detail

} // namespace config
} // namespace baton::actors

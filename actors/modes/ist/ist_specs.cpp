#include "actors/modes/ist/ist_specs.hpp"

#include <stdexcept>

#include "actors/config/role_spec_yaml.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

YAML::Node encode_shape(const model::ist_shape& x) {
  YAML::Node n;
  n["inputs"] = x.inputs;
  n["hidden"] = x.hidden;
  n["classes"] = x.classes;
  return n;
}

/// The shape, with every width at least `at_least` (workers and shards).
model::ist_shape decode_shape(const YAML::Node& n, int32_t at_least) {
  model::ist_shape x;
  x.inputs = n["inputs"].as<int64_t>();
  x.hidden = n["hidden"].as<std::vector<int64_t>>();
  x.classes = n["classes"].as<int64_t>();
  if (x.inputs < 1 || x.classes < 1 || x.hidden.empty() ||
      x.hidden.size() > ist_max_hidden_layers)
    throw std::runtime_error("inputs and classes must be positive, hidden 1 to " +
                             std::to_string(ist_max_hidden_layers) + " widths");
  for (int64_t width : x.hidden)
    if (width < at_least || width > ist_max_width)
      throw std::runtime_error("a hidden width of " + std::to_string(width) + " (expected " +
                               std::to_string(at_least) + " to " +
                               std::to_string(ist_max_width) + ")");
  return x;
}

ist_worker_spec decode_worker(const YAML::Node& n) {
  ist_worker_spec x;
  x.worker = n["worker"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  check_ist_index(x.worker, x.workers, "worker");
  check_ist_index(0, x.shards, "shard");
  x.local_steps = n["local_steps"].as<int32_t>();
  x.shape = decode_shape(n["shape"], std::max(x.workers, x.shards));
  x.task = decode_task(n["task"]);
  auto data = parse_source_spec(dump(n["data"]));
  if (!data)
    throw std::runtime_error(describe(data.error()));
  x.data = std::move(*data);
  x.optimizer = decode_optimizer(n["optimizer"]);
  x.eval_batch = n["eval_batch"].as<int64_t>();
  x.threads = n["threads"].as<int32_t>();
  x.progress_every = n["progress_every"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.local_steps < 1 || x.eval_batch < 1 || x.threads < 1 || x.progress_every < 1 ||
      !(x.optimizer.lr > 0) || x.data.plan.batch_size < 2 || x.shape.classes != x.task.classes)
    throw std::runtime_error("local_steps, eval_batch, threads, progress_every and lr must be "
                             "positive, the batch at least 2, classes the task's");
  return x;
}

ist_shard_spec decode_shard(const YAML::Node& n) {
  ist_shard_spec x;
  x.shard = n["shard"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  check_ist_index(x.shard, x.shards, "shard");
  check_ist_index(0, x.workers, "worker");
  x.shape = decode_shape(n["shape"], std::max(x.workers, x.shards));
  x.seed = n["seed"].as<uint64_t>();
  x.epochs = n["epochs"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.epochs < 1)
    throw std::runtime_error("epochs must be positive");
  return x;
}

} // namespace

void check_ist_index(int32_t index, int32_t count, const char* what) {
  if (count < 1 || count > ist_max_workers || index < 0 || index >= count)
    throw std::runtime_error(std::string{"need 0 <= "} + what + " < " + what + "s <= " +
                             std::to_string(ist_max_workers));
}

std::string to_yaml(const ist_worker_spec& x) {
  YAML::Node n;
  n["worker"] = x.worker;
  n["workers"] = x.workers;
  n["shards"] = x.shards;
  n["local_steps"] = x.local_steps;
  n["shape"] = encode_shape(x.shape);
  n["task"] = encode(x.task);
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"] = encode(x.optimizer);
  n["eval_batch"] = x.eval_batch;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

std::string to_yaml(const ist_shard_spec& x) {
  YAML::Node n;
  n["shard"] = x.shard;
  n["shards"] = x.shards;
  n["workers"] = x.workers;
  n["shape"] = encode_shape(x.shape);
  n["seed"] = x.seed;
  n["epochs"] = x.epochs;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

caf::expected<ist_worker_spec> parse_ist_worker_spec(const std::string& yaml) {
  return parse_role_yaml(decode_worker, yaml, "IST worker");
}

caf::expected<ist_shard_spec> parse_ist_shard_spec(const std::string& yaml) {
  return parse_role_yaml(decode_shard, yaml, "IST shard");
}

} // namespace ist
} // namespace modes
} // namespace baton::actors

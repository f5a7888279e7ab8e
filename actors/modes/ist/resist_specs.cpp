#include "actors/modes/ist/resist_specs.hpp"

#include <stdexcept>

#include "actors/config/role_spec_yaml.hpp"
#include "actors/modes/ist/ist_specs.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

/// resnet18's stem takes 1 (Fashion-MNIST) to a few channels.
constexpr int64_t max_channels = 64;

resist_worker_spec decode_worker(const YAML::Node& n) {
  resist_worker_spec x;
  x.worker = n["worker"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  check_ist_index(x.worker, x.workers, "worker");
  check_ist_index(0, x.shards, "shard");
  x.local_steps = n["local_steps"].as<int32_t>();
  x.in_channels = n["in_channels"].as<int64_t>();
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
      !(x.optimizer.lr > 0) || x.data.plan.batch_size < 2 || x.in_channels < 1 ||
      x.in_channels > max_channels)
    throw std::runtime_error("local_steps, eval_batch, threads, progress_every and lr must be "
                             "positive, the batch at least 2, in_channels 1 to " +
                             std::to_string(max_channels));
  return x;
}

resist_shard_spec decode_shard(const YAML::Node& n) {
  resist_shard_spec x;
  x.shard = n["shard"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  check_ist_index(x.shard, x.shards, "shard");
  check_ist_index(0, x.workers, "worker");
  x.in_channels = n["in_channels"].as<int64_t>();
  x.classes = n["classes"].as<int64_t>();
  x.seed = n["seed"].as<uint64_t>();
  x.epochs = n["epochs"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.epochs < 1 || x.classes < 1 || x.in_channels < 1 || x.in_channels > max_channels)
    throw std::runtime_error("epochs and classes must be positive, in_channels 1 to " +
                             std::to_string(max_channels));
  return x;
}

} // namespace

std::string to_yaml(const resist_worker_spec& x) {
  YAML::Node n;
  n["worker"] = x.worker;
  n["workers"] = x.workers;
  n["shards"] = x.shards;
  n["local_steps"] = x.local_steps;
  n["in_channels"] = x.in_channels;
  n["task"] = encode(x.task);
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"] = encode(x.optimizer);
  n["eval_batch"] = x.eval_batch;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

std::string to_yaml(const resist_shard_spec& x) {
  YAML::Node n;
  n["shard"] = x.shard;
  n["shards"] = x.shards;
  n["workers"] = x.workers;
  n["in_channels"] = x.in_channels;
  n["classes"] = x.classes;
  n["seed"] = x.seed;
  n["epochs"] = x.epochs;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

caf::expected<resist_worker_spec> parse_resist_worker_spec(const std::string& yaml) {
  return parse_role_yaml(decode_worker, yaml, "ResIST worker");
}

caf::expected<resist_shard_spec> parse_resist_shard_spec(const std::string& yaml) {
  return parse_role_yaml(decode_shard, yaml, "ResIST shard");
}

} // namespace ist
} // namespace modes
} // namespace baton::actors

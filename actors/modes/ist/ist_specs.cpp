#include "actors/modes/ist/ist_specs.hpp"

#include <algorithm>
#include <stdexcept>

#include "actors/config/role_spec_yaml.hpp"
#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

/// Throws std::runtime_error unless 0 <= index < count <= ist_max_workers
/// (`what`: "worker" or "shard").
void check_index(int32_t index, int32_t count, const char* what) {
  if (count < 1 || count > ist_max_workers || index < 0 || index >= count)
    throw std::runtime_error(std::string{"need 0 <= "} + what + " < " + what + "s <= " +
                             std::to_string(ist_max_workers));
}

/// The shape, checked for W workers and S shards.
template <class Scheme>
typename Scheme::shape decode_shape(const YAML::Node& n, int32_t workers, int32_t shards) {
  auto shape = Scheme::decode_shape(n);
  Scheme::check_shape(shape, workers, shards);
  return shape;
}

template <class Scheme>
worker_spec<Scheme> decode_worker(const YAML::Node& n) {
  worker_spec<Scheme> x;
  x.worker = n["worker"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  check_index(x.worker, x.workers, "worker");
  check_index(0, x.shards, "shard");
  x.local_steps = n["local_steps"].as<int32_t>();
  x.shape = decode_shape<Scheme>(n["shape"], x.workers, x.shards);
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

template <class Scheme>
shard_spec<Scheme> decode_shard(const YAML::Node& n) {
  shard_spec<Scheme> x;
  x.shard = n["shard"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  check_index(x.shard, x.shards, "shard");
  check_index(0, x.workers, "worker");
  x.shape = decode_shape<Scheme>(n["shape"], x.workers, x.shards);
  x.seed = n["seed"].as<uint64_t>();
  x.epochs = n["epochs"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.epochs < 1)
    throw std::runtime_error("epochs must be positive");
  return x;
}

} // namespace

template <class Scheme>
std::string to_yaml(const worker_spec<Scheme>& x) {
  YAML::Node n;
  n["worker"] = x.worker;
  n["workers"] = x.workers;
  n["shards"] = x.shards;
  n["local_steps"] = x.local_steps;
  n["shape"] = Scheme::encode_shape(x.shape);
  n["task"] = encode(x.task);
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"] = encode(x.optimizer);
  n["eval_batch"] = x.eval_batch;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

template <class Scheme>
std::string to_yaml(const shard_spec<Scheme>& x) {
  YAML::Node n;
  n["shard"] = x.shard;
  n["shards"] = x.shards;
  n["workers"] = x.workers;
  n["shape"] = Scheme::encode_shape(x.shape);
  n["seed"] = x.seed;
  n["epochs"] = x.epochs;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

template <class Scheme>
caf::expected<worker_spec<Scheme>> parse_worker_spec(const std::string& yaml) {
  return parse_role_yaml(decode_worker<Scheme>, yaml, std::string{Scheme::title} + " worker");
}

template <class Scheme>
caf::expected<shard_spec<Scheme>> parse_shard_spec(const std::string& yaml) {
  return parse_role_yaml(decode_shard<Scheme>, yaml, std::string{Scheme::title} + " shard");
}

template std::string to_yaml(const worker_spec<neuron_scheme>&);
template std::string to_yaml(const shard_spec<neuron_scheme>&);
template caf::expected<worker_spec<neuron_scheme>> parse_worker_spec<neuron_scheme>(const std::string&);
template caf::expected<shard_spec<neuron_scheme>> parse_shard_spec<neuron_scheme>(const std::string&);
template std::string to_yaml(const worker_spec<block_scheme>&);
template std::string to_yaml(const shard_spec<block_scheme>&);
template caf::expected<worker_spec<block_scheme>> parse_worker_spec<block_scheme>(const std::string&);
template caf::expected<shard_spec<block_scheme>> parse_shard_spec<block_scheme>(const std::string&);

} // namespace ist
} // namespace modes
} // namespace baton::actors

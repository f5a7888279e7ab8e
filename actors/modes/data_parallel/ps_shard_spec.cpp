// The settings codec of the data-parallel parameter shard: YAML, with
// role_spec's pieces (model, optimizer) and a source's data settings, as
// the worker's codec (data_parallel_worker_spec.cpp).

#include "actors/modes/data_parallel/ps_shard.hpp"

#include <stdexcept>

#include "actors/config/role_spec_yaml.hpp"
#include "actors/modes/data_parallel/data_parallel_section.hpp"
#include "actors/modes/data_parallel/data_parallel_worker.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

namespace {

data_parallel_shard_spec decode(const YAML::Node& n) {
  data_parallel_shard_spec x;
  x.shard = n["shard"].as<int32_t>();
  x.shards = n["shards"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.model = decode_worker_model(n["model"]);
  x.freeze_up_to = n["freeze_up_to"].as<std::string>();
  auto data = parse_source_spec(dump(n["data"]));
  if (!data)
    throw std::runtime_error(describe(data.error()));
  x.data = std::move(*data);
  x.optimizer = decode_optimizer(n["optimizer"]);
  x.linear_scaling = n["linear_scaling"].as<bool>();
  x.base_batch = n["base_batch"].as<int64_t>();
  x.warmup_epochs = n["warmup_epochs"].as<double>();
  x.threads = n["threads"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.shards < 1 || x.shards > max_shards || x.shard < 0 || x.shard >= x.shards)
    throw std::runtime_error("need 0 <= shard < shards <= " + std::to_string(max_shards));
  if (x.workers < 1 || x.base_batch < 1 || !(x.warmup_epochs >= 0) || x.threads < 1 ||
      !(x.optimizer.lr > 0))
    throw std::runtime_error("workers, base_batch, threads and lr must be positive, "
                             "warmup_epochs not negative");
  return x;
}

} // namespace

std::string to_yaml(const data_parallel_shard_spec& x) {
  YAML::Node n;
  n["shard"] = x.shard;
  n["shards"] = x.shards;
  n["workers"] = x.workers;
  n["model"] = encode(x.model);
  n["freeze_up_to"] = x.freeze_up_to;
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"] = encode(x.optimizer);
  n["linear_scaling"] = x.linear_scaling;
  n["base_batch"] = x.base_batch;
  n["warmup_epochs"] = x.warmup_epochs;
  n["threads"] = x.threads;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

caf::expected<data_parallel_shard_spec> parse_data_parallel_shard_spec(const std::string& yaml) {
  try {
    return decode(YAML::Load(yaml));
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, std::string{"unreadable data-parallel shard spec: "} +
                                          e.what());
  }
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

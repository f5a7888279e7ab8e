// The settings codec of the data-parallel worker: YAML, with role_spec's
// pieces (model, task, optimizer); its data part is a source's settings.

#include "actors/modes/data_parallel/data_parallel_worker.hpp"

#include <stdexcept>

#include "actors/config/role_spec_yaml.hpp"
#include "messages/errc.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/local.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

model::model_spec decode_worker_model(const YAML::Node& n) {
  auto x = decode_model(n);
  if (x.name != "mlp" && x.name != "ist_mlp" && x.name != "convnet" && x.name != "resnet18")
    throw std::runtime_error("unknown worker model '" + x.name + "'");
  if (x.classes < 1 || x.in_channels < 1)
    throw std::runtime_error("classes and in_channels must be positive");
  return x;
}

namespace {

/// The parameter server's settings of a worker (exchange: ps).
void decode_exchange(const YAML::Node& n, data_parallel_worker_spec& x) {
  x.exchange = n["exchange"].as<std::string>();
  x.shards = n["shards"].as<int32_t>();
  x.max_staleness = n["max_staleness"].as<int32_t>();
  if ((x.exchange != "ring" && x.exchange != "ps") || x.shards < 1 || x.max_staleness < 0)
    throw std::runtime_error("exchange must be ring or ps, shards positive, max_staleness "
                             "not negative");
}

/// `freeze:` of the settings: the frozen prefix, adaptive freezing, the cache.
YAML::Node encode_freeze(const data_parallel_worker_spec& x) {
  YAML::Node n;
  n["up_to"] = x.freeze_up_to;
  n["groups"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& g : x.freeze_groups)
    n["groups"].push_back(g);
  n["interval"] = x.adaptive.interval;
  n["percentile"] = x.adaptive.percentile;
  n["max_frozen"] = x.adaptive.max_frozen;
  n["cache"] = x.cache;
  n["cache_mb"] = x.cache_mb;
  n["feature_block"] = x.feature_block;
  return n;
}

/// Local SGD, the frozen prefix, adaptive freezing, the cache and the
/// pretrained backbone of a worker.
void decode_freeze(const YAML::Node& n, data_parallel_worker_spec& x) {
  x.sync_every = n["sync_every"].as<int32_t>();
  x.checkpoint = n["checkpoint"].as<std::string>();
  const YAML::Node f = n["freeze"];
  x.freeze_up_to = f["up_to"].as<std::string>();
  x.freeze_groups = f["groups"].as<std::vector<std::string>>();
  x.adaptive.interval = f["interval"].as<int32_t>();
  x.adaptive.percentile = f["percentile"].as<double>();
  x.adaptive.max_frozen = f["max_frozen"].as<int32_t>();
  x.cache = f["cache"].as<bool>();
  x.cache_mb = f["cache_mb"].as<double>();
  x.feature_block = f["feature_block"].as<int64_t>();
  const auto groups = static_cast<int32_t>(x.freeze_groups.size());
  if (x.sync_every < 0 || x.adaptive.interval < 1 || !(x.adaptive.percentile >= 0) ||
      !(x.adaptive.percentile <= 100) || x.adaptive.max_frozen < -1 ||
      x.adaptive.max_frozen > groups)
    throw std::runtime_error("need sync_every >= 0, freeze.interval >= 1, freeze.percentile "
                             "in [0, 100] and -1 <= freeze.max_frozen <= groups");
  if (!(x.cache_mb >= 0) || x.feature_block < 0 || (x.cache && x.feature_block < 1))
    throw std::runtime_error("need freeze.cache_mb >= 0 and freeze.feature_block >= 0 (>= 1 "
                             "with the cache)");
  if (!x.freeze_groups.empty() && (!x.freeze_up_to.empty() || x.sync_every > 0))
    throw std::runtime_error("adaptive freezing (freeze.groups) excludes freeze.up_to and "
                             "sync_every");
}

data_parallel_worker_spec decode(const YAML::Node& n) {
  data_parallel_worker_spec x;
  x.worker = n["worker"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.model = decode_worker_model(n["model"]);
  x.task = decode_task(n["task"]);
  auto data = parse_source_spec(dump(n["data"]));
  if (!data)
    throw std::runtime_error(describe(data.error()));
  x.data = std::move(*data);
  x.optimizer = decode_optimizer(n["optimizer"]);
  x.linear_scaling = n["linear_scaling"].as<bool>();
  x.base_batch = n["base_batch"].as<int64_t>();
  x.warmup_epochs = n["warmup_epochs"].as<double>();
  x.bucket_mb = n["bucket_mb"].as<double>();
  x.overlap = n["overlap"].as<bool>();
  decode_exchange(n, x);
  decode_freeze(n, x);
  x.eval_batch = n["eval_batch"].as<int64_t>();
  x.threads = n["threads"].as<int32_t>();
  x.progress_every = n["progress_every"].as<int32_t>();
  x.recovery = decode_trainable_recovery(n["run"]);
  if (x.workers < 1 || x.worker < 0 || x.worker >= x.workers)
    throw std::runtime_error("need 0 <= worker < workers");
  if (!(x.bucket_mb > 0) || x.base_batch < 1 || !(x.warmup_epochs >= 0) || x.eval_batch < 1 ||
      x.threads < 1 || x.progress_every < 1 || !(x.optimizer.lr > 0))
    throw std::runtime_error("bucket_mb, base_batch, eval_batch, threads, progress_every and "
                             "lr must be positive, warmup_epochs not negative");
  return x;
}

} // namespace

std::string to_yaml(const data_parallel_worker_spec& x) {
  YAML::Node n;
  n["worker"] = x.worker;
  n["workers"] = x.workers;
  n["model"] = encode(x.model);
  n["task"] = encode(x.task);
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"] = encode(x.optimizer);
  n["linear_scaling"] = x.linear_scaling;
  n["base_batch"] = x.base_batch;
  n["warmup_epochs"] = x.warmup_epochs;
  n["bucket_mb"] = x.bucket_mb;
  n["overlap"] = x.overlap;
  n["exchange"] = x.exchange;
  n["shards"] = x.shards;
  n["max_staleness"] = x.max_staleness;
  n["sync_every"] = x.sync_every;
  n["freeze"] = encode_freeze(x);
  n["checkpoint"] = x.checkpoint;
  n["eval_batch"] = x.eval_batch;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

caf::expected<data_parallel_worker_spec> parse_data_parallel_worker_spec(const std::string& yaml) {
  try {
    return decode(YAML::Load(yaml));
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, std::string{"unreadable data-parallel worker spec: "} +
                                          e.what());
  }
}

model::layered_model make_data_parallel_model(const model::model_spec& spec) {
  if (spec.name == "mlp" || spec.name == "ist_mlp") // whole networks, no classifier to add
    return model::make_model(spec);
  return model::make_pretrain_model(spec, spec.classes);
}

model::layered_model initial_data_parallel_model(const data_parallel_worker_spec& spec) {
  auto m = make_data_parallel_model(spec.model);
  if (!spec.checkpoint.empty()) {
    // The slice shares its modules with `m`: loading it loads m's backbone.
    auto backbone = m.slice(0, m.size() - 1);
    model::load_checkpoint(backbone, spec.checkpoint);
  }
  return m;
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

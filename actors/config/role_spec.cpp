#include "actors/config/role_spec.hpp"

#include "actors/config/role_spec_yaml.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace config {

// -- the pieces a mode's settings nest (role_spec_yaml.hpp) ---------------------

YAML::Node encode(const model::model_spec& x) {
  YAML::Node n;
  n["name"] = x.name;
  n["classes"] = x.classes;
  n["in_channels"] = x.in_channels;
  n["wide_features"] = x.wide_features;
  n["hidden"] = x.hidden;
  n["path"] = x.path;
  // Seeds are 64-bit unsigned; YAML ints would be read back signed.
  n["seed"] = std::to_string(x.seed);
  return n;
}

YAML::Node encode(const model::task& x) {
  YAML::Node n;
  n["name"] = x.name;
  n["labels"] = x.label_map;
  return n;
}

YAML::Node encode(const model::optimizer_spec& x) {
  YAML::Node n;
  n["lr"] = x.lr;
  n["momentum"] = x.momentum;
  n["weight_decay"] = x.weight_decay;
  return n;
}

std::string dump(const YAML::Node& n) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << n;
  return out.c_str();
}

model::model_spec decode_model(const YAML::Node& n) {
  model::model_spec x;
  x.name = n["name"].as<std::string>();
  x.classes = n["classes"].as<int64_t>();
  x.in_channels = n["in_channels"].as<int64_t>();
  x.wide_features = n["wide_features"].as<int64_t>();
  if (n["hidden"]) // absent in settings written before ist_mlp: the default
    x.hidden = n["hidden"].as<std::vector<int64_t>>();
  x.path = n["path"].as<std::string>();
  x.seed = std::stoull(n["seed"].as<std::string>());
  return x;
}

model::optimizer_spec decode_optimizer(const YAML::Node& n) {
  model::optimizer_spec x;
  x.lr = n["lr"].as<double>();
  x.momentum = n["momentum"].as<double>();
  x.weight_decay = n["weight_decay"].as<double>();
  return x;
}

model::task decode_task(const YAML::Node& n) {
  return model::make_task(n["name"].as<std::string>(), n["labels"].as<std::vector<int64_t>>());
}

namespace {

YAML::Node encode(const recovery_spec& x) {
  YAML::Node n;
  n["checkpoint_dir"] = x.checkpoint_dir;
  n["checkpoint_every"] = x.checkpoint_every;
  n["restore_step"] = x.restore_step;
  n["throw_at_step"] = x.throw_at_step;
  n["notify_from_step"] = x.notify_from_step;
  n["run_id"] = x.run_id;
  return n;
}

} // namespace

YAML::Node encode(const run_settings& x) {
  YAML::Node n;
  n["recovery"] = encode(x.recovery);
  n["trace"] = x.trace;
  return n;
}

namespace {

// -- decoding (throws YAML::Exception; callers turn it into an error) ---------

recovery_spec decode_recovery(const YAML::Node& n) {
  recovery_spec x;
  x.checkpoint_dir = n["checkpoint_dir"].as<std::string>();
  x.checkpoint_every = n["checkpoint_every"].as<int32_t>();
  x.restore_step = n["restore_step"].as<int64_t>();
  x.throw_at_step = n["throw_at_step"].as<int64_t>();
  x.notify_from_step = n["notify_from_step"].as<int64_t>();
  x.run_id = n["run_id"].as<std::string>();
  if (x.checkpoint_every < 0 || x.restore_step < 0)
    throw std::runtime_error("checkpoint_every and restore_step must not be negative");
  if (x.checkpoint_every > 0 && x.checkpoint_dir.empty())
    throw std::runtime_error("checkpoints need a checkpoint_dir");
  return x;
}

/// `run:` of a role's settings; absent: nothing to restore, no checkpoints.
run_settings decode_run(const YAML::Node& n) {
  run_settings x;
  if (!n)
    return x;
  x.recovery = decode_recovery(n["recovery"]);
  x.trace = n["trace"].as<bool>();
  return x;
}

} // namespace

recovery_spec decode_trainable_recovery(const YAML::Node& run) {
  auto x = decode_run(run).recovery;
  if (x.restore_step > 0 && x.checkpoint_dir.empty())
    throw std::runtime_error("restoring step " + std::to_string(x.restore_step) +
                             " needs a checkpoint_dir");
  return x;
}

namespace {

template <class T, class F>
caf::expected<T> parse(const std::string& yaml, const char* role, F decode_fn) {
  try {
    return decode_fn(YAML::Load(yaml));
  } catch (const std::exception& e) {
    return make_error(errc::bad_config,
                      std::string{"unreadable "} + role + " spec: " + e.what());
  }
}

} // namespace

std::string with_run(const std::string& settings, const run_settings& run) {
  auto n = YAML::Load(settings);
  n["run"] = encode(run);
  return dump(n);
}

std::string to_yaml(const source_spec& x) {
  YAML::Node n;
  n["dataset"] = x.dataset;
  n["data_dir"] = x.data_dir;
  n["train_limit"] = x.train_limit;
  n["test_limit"] = x.test_limit;
  n["synthetic_train"] = x.synthetic_train;
  n["synthetic_test"] = x.synthetic_test;
  n["synthetic_shape"] = x.synthetic_shape;
  n["batch_size"] = x.plan.batch_size;
  n["microbatches"] = x.plan.microbatches;
  n["epochs"] = x.plan.epochs;
  n["seed"] = std::to_string(x.plan.seed);
  for (const auto& t : x.tasks)
    n["tasks"].push_back(encode(t));
  n["window"] = x.window;
  run_settings run;
  run.recovery.restore_step = x.start_step;
  n["run"] = encode(run);
  return dump(n);
}

std::string to_yaml(const stage_spec& x) {
  YAML::Node n;
  n["backbone"] = encode(x.backbone);
  n["checkpoint"] = x.checkpoint;
  n["begin"] = x.begin;
  n["end"] = x.end;
  n["window"] = x.window;
  n["threads"] = x.threads;
  n["features"]["cache"] = x.features.cache;
  n["features"]["cache_mb"] = x.features.cache_mb;
  n["features"]["block_rows"] = x.features.block_rows;
  return dump(n);
}

std::string to_yaml(const head_role_spec& x) {
  YAML::Node n;
  n["name"] = x.head.name;
  n["task"] = encode(x.head.task_def);
  n["model"] = encode(x.head.model);
  n["optimizer"] = encode(x.head.optimizer);
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["run"] = encode(run_settings{x.recovery, false});
  return dump(n);
}

std::string to_yaml(const pipeline_stage_spec& x) {
  YAML::Node n;
  n["backbone"] = encode(x.backbone);
  n["classes"] = x.classes;
  n["task"] = x.task;
  n["begin"] = x.begin;
  n["end"] = x.end;
  n["first"] = x.first;
  n["last"] = x.last;
  n["schedule"] = x.schedule;
  n["optimizer"] = encode(x.optimizer);
  n["window"] = x.window;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
  n["replica"] = x.replica;
  n["replicas"] = x.replicas;
  n["upstream_replicas"] = x.upstream_replicas;
  n["max_in_flight"] = x.max_in_flight;
  n["vertical_sync"] = x.vertical_sync;
  n["run"] = encode(run_settings{x.recovery, x.trace});
  return dump(n);
}

caf::expected<pipeline_stage_spec> parse_pipeline_stage_spec(const std::string& yaml) {
  return parse<pipeline_stage_spec>(yaml, "pipeline stage", [](const YAML::Node& n) {
    pipeline_stage_spec x;
    x.backbone = decode_model(n["backbone"]);
    x.classes = n["classes"].as<int64_t>();
    x.task = n["task"].as<std::string>();
    x.begin = n["begin"].as<int64_t>();
    x.end = n["end"].as<int64_t>();
    x.first = n["first"].as<bool>();
    x.last = n["last"].as<bool>();
    x.schedule = n["schedule"].as<std::string>();
    x.optimizer = decode_optimizer(n["optimizer"]);
    x.window = n["window"].as<int32_t>();
    x.threads = n["threads"].as<int32_t>();
    x.progress_every = n["progress_every"].as<int32_t>();
    x.replica = n["replica"].as<int32_t>();
    x.replicas = n["replicas"].as<int32_t>();
    x.upstream_replicas = n["upstream_replicas"].as<int32_t>();
    x.max_in_flight = n["max_in_flight"].as<int32_t>();
    x.vertical_sync = n["vertical_sync"].as<bool>();
    x.trace = decode_run(n["run"]).trace;
    x.recovery = decode_trainable_recovery(n["run"]);
    if (x.begin < 0 || x.end <= x.begin || x.window < 1 || x.threads < 1 || x.classes < 1)
      throw std::runtime_error("need 0 <= begin < end and positive window, threads, classes");
    if (x.replicas < 1 || x.replica < 0 || x.replica >= x.replicas || x.upstream_replicas < 1 ||
        x.max_in_flight < 0)
      throw std::runtime_error("need 0 <= replica < replicas, upstream_replicas >= 1 and "
                               "max_in_flight >= 0");
    if (x.schedule != "gpipe" && x.schedule != "1f1b-flush" && x.schedule != "1f1b" &&
        x.schedule != "1f1b-dynamic")
      throw std::runtime_error("unknown schedule '" + x.schedule + "'");
    return x;
  });
}

caf::expected<source_spec> parse_source_spec(const std::string& yaml) {
  return parse<source_spec>(yaml, "source", [](const YAML::Node& n) {
    source_spec x;
    x.dataset = n["dataset"].as<std::string>();
    x.data_dir = n["data_dir"].as<std::string>();
    x.train_limit = n["train_limit"].as<int64_t>();
    x.test_limit = n["test_limit"].as<int64_t>();
    x.synthetic_train = n["synthetic_train"].as<int64_t>();
    x.synthetic_test = n["synthetic_test"].as<int64_t>();
    x.synthetic_shape = n["synthetic_shape"].as<std::vector<int64_t>>();
    if (x.synthetic_shape.size() != 3)
      throw std::runtime_error("synthetic_shape must be [C, H, W]");
    x.plan.batch_size = n["batch_size"].as<int64_t>();
    x.plan.microbatches = n["microbatches"].as<int32_t>();
    x.plan.epochs = n["epochs"].as<int32_t>();
    x.plan.seed = std::stoull(n["seed"].as<std::string>());
    for (const auto& t : n["tasks"])
      x.tasks.push_back(decode_task(t));
    x.window = n["window"].as<int32_t>();
    x.start_step = decode_run(n["run"]).recovery.restore_step;
    if (x.window < 1 || x.plan.batch_size < 1 || x.plan.microbatches < 1 || x.start_step < 0)
      throw std::runtime_error("window, batch_size and microbatches must be positive, "
                               "start_step not negative");
    return x;
  });
}

caf::expected<stage_spec> parse_stage_spec(const std::string& yaml) {
  return parse<stage_spec>(yaml, "stage", [](const YAML::Node& n) {
    stage_spec x;
    x.backbone = decode_model(n["backbone"]);
    x.checkpoint = n["checkpoint"].as<std::string>();
    x.begin = n["begin"].as<int64_t>();
    x.end = n["end"].as<int64_t>();
    x.window = n["window"].as<int32_t>();
    x.threads = n["threads"].as<int32_t>();
    x.features.cache = n["features"]["cache"].as<bool>();
    x.features.cache_mb = n["features"]["cache_mb"].as<double>();
    x.features.block_rows = n["features"]["block_rows"].as<int64_t>();
    if (x.begin < 0 || x.end <= x.begin || x.window < 1 || x.threads < 1)
      throw std::runtime_error("need 0 <= begin < end, window >= 1, threads >= 1");
    if (!(x.features.cache_mb >= 0) || x.features.block_rows < 0 ||
        (x.features.cache && (x.features.block_rows < 1 || x.begin != 0)))
      throw std::runtime_error("need cache_mb >= 0, block_rows >= 0, and with a cache "
                               "block_rows >= 1 and begin 0");
    return x;
  });
}

caf::expected<head_role_spec> parse_head_spec(const std::string& yaml) {
  return parse<head_role_spec>(yaml, "head", [](const YAML::Node& n) {
    head_role_spec x;
    x.head.name = n["name"].as<std::string>();
    x.head.task_def = decode_task(n["task"]);
    x.head.model = decode_model(n["model"]);
    x.head.optimizer = decode_optimizer(n["optimizer"]);
    x.threads = n["threads"].as<int32_t>();
    x.progress_every = n["progress_every"].as<int32_t>();
    x.recovery = decode_trainable_recovery(n["run"]);
    if (x.threads < 1 || x.progress_every < 1)
      throw std::runtime_error("threads and progress_every must be positive");
    return x;
  });
}

} // namespace config
} // namespace baton::actors

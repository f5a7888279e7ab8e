// The settings codec of the data-parallel worker (YAML, as role_spec.cpp
// writes the other roles'; its data part is a source's settings).

#include "actors/modes/data_parallel/data_parallel_worker.hpp"

#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "messages/errc.hpp"
#include "model/local.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

namespace {

YAML::Node encode_model(const model::model_spec& x) {
  YAML::Node n;
  n["name"] = x.name;
  n["classes"] = x.classes;
  n["in_channels"] = x.in_channels;
  n["seed"] = std::to_string(x.seed); // 64-bit unsigned: as text
  return n;
}

model::model_spec decode_model(const YAML::Node& n) {
  model::model_spec x;
  x.name = n["name"].as<std::string>();
  x.classes = n["classes"].as<int64_t>();
  x.in_channels = n["in_channels"].as<int64_t>();
  x.seed = std::stoull(n["seed"].as<std::string>());
  if (x.name != "mlp" && x.name != "convnet" && x.name != "resnet18")
    throw std::runtime_error("unknown worker model '" + x.name + "'");
  if (x.classes < 1 || x.in_channels < 1)
    throw std::runtime_error("classes and in_channels must be positive");
  return x;
}

std::string dump(const YAML::Node& n) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << n;
  return out.c_str();
}

data_parallel_worker_spec decode(const YAML::Node& n) {
  data_parallel_worker_spec x;
  x.worker = n["worker"].as<int32_t>();
  x.workers = n["workers"].as<int32_t>();
  x.model = decode_model(n["model"]);
  x.task = model::make_task(n["task"]["name"].as<std::string>(),
                            n["task"]["labels"].as<std::vector<int64_t>>());
  auto data = parse_source_spec(dump(n["data"]));
  if (!data)
    throw std::runtime_error(describe(data.error()));
  x.data = std::move(*data);
  x.optimizer.lr = n["optimizer"]["lr"].as<double>();
  x.optimizer.momentum = n["optimizer"]["momentum"].as<double>();
  x.optimizer.weight_decay = n["optimizer"]["weight_decay"].as<double>();
  x.linear_scaling = n["linear_scaling"].as<bool>();
  x.base_batch = n["base_batch"].as<int64_t>();
  x.warmup_epochs = n["warmup_epochs"].as<double>();
  x.bucket_mb = n["bucket_mb"].as<double>();
  x.eval_batch = n["eval_batch"].as<int64_t>();
  x.threads = n["threads"].as<int32_t>();
  x.progress_every = n["progress_every"].as<int32_t>();
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
  n["model"] = encode_model(x.model);
  n["task"]["name"] = x.task.name;
  n["task"]["labels"] = x.task.label_map;
  n["data"] = YAML::Load(to_yaml(x.data));
  n["optimizer"]["lr"] = x.optimizer.lr;
  n["optimizer"]["momentum"] = x.optimizer.momentum;
  n["optimizer"]["weight_decay"] = x.optimizer.weight_decay;
  n["linear_scaling"] = x.linear_scaling;
  n["base_batch"] = x.base_batch;
  n["warmup_epochs"] = x.warmup_epochs;
  n["bucket_mb"] = x.bucket_mb;
  n["eval_batch"] = x.eval_batch;
  n["threads"] = x.threads;
  n["progress_every"] = x.progress_every;
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
  if (spec.name == "mlp")
    return model::make_model(spec);
  return model::make_pretrain_model(spec, spec.classes);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

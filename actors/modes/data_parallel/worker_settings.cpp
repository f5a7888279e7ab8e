// The settings codec of the data-parallel worker (its field list:
// worker_settings.hpp), and the model a worker starts from.

#include "actors/modes/data_parallel/worker_settings.hpp"

#include "actors/config/yaml_codec.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/worker_layers.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/pretrain.hpp"
#include "model/ist_mlp/mlp.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

std::string to_yaml(const worker_settings& x) {
  return write_yaml(x);
}

caf::expected<worker_settings> parse_worker_settings(const std::string& yaml) {
  return read_yaml<worker_settings>(yaml, "data-parallel worker");
}

model::layered_model make_worker_model(const model::model_spec& spec) {
  // Whole networks, no classifier to add.
  if (spec.name == model::ist::mlp_name)
    return model::ist::make_mlp(spec);
  if (spec.name == "mlp")
    return model::make_model(spec);
  return model::make_pretrain_model(spec, spec.classes);
}

model::layer_listing list_worker_layers(const model::model_spec& spec) {
  if (spec.name == model::ist::mlp_name)
    return model::ist::list_mlp_layers(spec);
  if (spec.name == "mlp")
    return model::list_layers(spec);
  return model::list_pretrain_layers(spec, spec.classes);
}

model::layered_model initial_model(const worker_settings& spec) {
  auto m = make_worker_model(spec.model);
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

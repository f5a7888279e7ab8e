// The settings codec of the data-parallel worker (its field list:
// worker_settings.hpp) and the layers of its model, free of LibTorch's
// modules (the model itself: worker_model.cpp).

#include "actors/modes/data_parallel/worker_settings.hpp"

#include "actors/config/yaml_codec.hpp"
#include "actors/modes/data_parallel/worker_layers.hpp"
#include "model/core/layer_listing.hpp"
#include "model/ist_mlp/mlp_layers.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

std::string to_yaml(const worker_settings& x) {
  return write_yaml(x);
}

caf::expected<worker_settings> parse_worker_settings(const std::string& yaml) {
  return read_yaml<worker_settings>(yaml, "data-parallel worker");
}

model::layer_listing list_worker_layers(const model::model_spec& spec) {
  if (spec.name == model::ist::mlp_name)
    return model::ist::list_mlp_layers(spec);
  if (spec.name == "mlp")
    return model::list_layers(spec);
  return model::list_pretrain_layers(spec, spec.classes);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

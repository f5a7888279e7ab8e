// The model a data-parallel worker starts from (worker.hpp): LibTorch's
// modules, apart from the settings' codec (worker_settings.cpp), which the
// config checks and the fuzzers compile without them.

#include "actors/modes/data_parallel/worker.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/pretrain.hpp"
#include "model/ist_mlp/mlp.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

model::layered_model make_worker_model(const model::model_spec& spec) {
  // Whole networks, no classifier to add.
  if (spec.name == model::ist::mlp_name)
    return model::ist::make_mlp(spec);
  if (spec.name == "mlp")
    return model::make_model(spec);
  return model::make_pretrain_model(spec, spec.classes);
}

model::layered_model initial_model(const worker_settings& spec) {
  auto m = make_worker_model(spec.model);
  if (!spec.checkpoint.empty())
    model::load_pretrained_backbone(m, spec.checkpoint);
  return m;
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors

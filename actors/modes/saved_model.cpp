#include "actors/modes/saved_model.hpp"

#include <exception>

#include <torch/torch.h>

#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {

caf::expected<const std::vector<at::Tensor>*> sent_weights(const job_result& result,
                                                           const std::string& actor) {
  for (const auto& w : result.stage_weights)
    if (w.from == actor)
      return &w.tensors;
  return make_error(errc::actor_failed,
                    "cannot save the model: '" + actor + "' sent no final weights");
}

caf::error put_sent_weights(model::layered_model& m, const std::vector<at::Tensor>& sent,
                            const std::string& who) {
  auto state = m.state();
  if (sent.size() != state.size())
    return make_error(errc::actor_failed, "cannot save the model: '" + who + "' sent " +
                                            std::to_string(sent.size()) + " tensors for " +
                                            std::to_string(state.size()) +
                                            " parameters and buffers");
  for (size_t p = 0; p < state.size(); ++p)
    if (!sent[p].defined() || !sent[p].sizes().equals(state[p].sizes()) ||
        sent[p].scalar_type() != state[p].scalar_type())
      return make_error(errc::actor_failed, "cannot save the model: '" + who + "' sent tensor " +
                                              std::to_string(p) + " of another shape or type");
  torch::NoGradGuard no_grad;
  for (size_t p = 0; p < state.size(); ++p)
    state[p].copy_(sent[p]);
  return caf::none;
}

model::input_normalisation export_normalisation(const model::data_spec& data,
                                                const job_result& result) {
  return result.normalisation ? *result.normalisation : model::data_normalisation(data);
}

model::export_options export_options_of(const model::model_spec& spec,
                                        const model::data_spec& data, const job_result& result) {
  model::export_options options;
  if (spec.name == "torchscript")
    options.script_path = spec.path;
  options.input = export_normalisation(data, result);
  return options;
}

caf::expected<void> saving(const std::string& path, const std::function<caf::error()>& write) {
  try {
    if (auto err = write())
      return err;
    return {};
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, "cannot save the model to " + path + ": " + e.what());
  }
}

} // namespace modes
} // namespace baton::actors

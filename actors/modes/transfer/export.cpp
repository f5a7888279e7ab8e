#include "actors/modes/transfer/export.hpp"

#include <vector>

#include "actors/modes/saved_model.hpp"
#include "actors/modes/transfer/section.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/export.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

/// Whether the head `name` ran (a run with --only-head runs one).
bool ran(const job_result& result, const std::string& name) {
  for (const auto& h : result.heads)
    if (h.actor == name)
      return true;
  return false;
}

} // namespace

caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path) {
  return saving(path, [&] {
    // The backbone is frozen: its weights are the checkpoint's, as every
    // stage loaded them.
    auto backbone = model::make_model(t.backbone);
    if (!t.checkpoint.empty())
      model::load_checkpoint(backbone, t.checkpoint);
    std::vector<model::named_model> heads;
    for (const auto& h : section_of(t).heads) {
      if (!ran(result, h.spec.name))
        continue;
      auto sent = sent_weights(result, h.spec.name);
      if (!sent)
        return sent.error();
      auto head = model::make_model(h.spec.model);
      if (auto err = put_sent_weights(head, **sent, h.spec.name))
        return err;
      heads.push_back({h.spec.name, std::move(head)});
    }
    model::save_module(model::script_module(backbone, export_options_of(t.backbone, t.data, result), heads),
                       path);
    return caf::error{};
  });
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors

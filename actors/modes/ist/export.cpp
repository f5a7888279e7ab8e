#include "actors/modes/ist/export.hpp"

#include <vector>

#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/plan.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "actors/modes/saved_model.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace {

template <class Scheme>
caf::expected<void> save_scheme_model(const topology& t, const job_result& result,
                                      const std::string& path) {
  auto task = task_of(t);
  if (!task)
    return task.error();
  const auto spec = Scheme::worker_settings_of(t, **task, 0);
  typename Scheme::pieces owned;
  for (int32_t s = 0; s < spec.shards; ++s) {
    auto sent = sent_weights(result, shard_name(s));
    if (!sent)
      return sent.error();
    owned.push_back(**sent);
  }
  return saving(path, [&] {
    auto whole = Scheme::whole_network(spec, owned);
    whole.options.input = export_normalisation(t.data, result);
    model::export_model(whole.model, path, whole.options);
    return caf::error{};
  });
}

} // namespace

caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path) {
  if (section_of(t).kind == block_scheme::names.kind)
    return save_scheme_model<block_scheme>(t, result, path);
  return save_scheme_model<neuron_scheme>(t, result, path);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors

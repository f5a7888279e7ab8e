#include "actors/modes/ist/local.hpp"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

caf::expected<job_result> run_local(const topology& t, const run_request& r) {
  if (t.target_accuracy > 0 || t.runtime.stop_after_seconds > 0)
    spdlog::warn("--mode local of job: ist runs every epoch (early_stopping aside): "
                 "target_accuracy and "
                 "runtime.stop_after_seconds stop the actors' run only");
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.compute_threads);
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    if (section_of(t).kind == block_scheme::names.kind)
      return block_scheme::run_local(t, *task);
    return neuron_scheme::run_local(t, *task);
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

} // namespace ist
} // namespace modes
} // namespace baton::actors

#include "actors/modes/ist/plan.hpp"

#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

caf::expected<const model::task*> task_of(const topology& t) {
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config,
                      t.file + ": task '" + t.task + "' is not one of the topology's tasks");
  return task;
}

caf::expected<job_plan> plan(const topology& t) {
  if (section_of(t).kind == block_scheme::names.kind)
    return block_scheme::plan(t);
  return neuron_scheme::plan(t);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors

#include "actors/modes/schedule_length.hpp"

#include "messages/errc.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {

void count_schedule_samples(const config::detail::field& blame, const model::optimizer_spec& o,
                            topology& t, const std::string& who) {
  if (!o.scheduled() || t.training_samples)
    return;
  try {
    t.training_samples = model::data_size(t.data, model::split::train);
  } catch (const model::error&) {
    blame.fail(blame.name() + ": " + who + " step along the schedule '" + o.schedule +
               "' over the run's steps, which are counted from the training samples where the "
               "run is planned, and this host cannot read the data's headers (" +
               (t.data.kind == "npy" ? t.data.train.x : t.data.path) +
               "); expected the data readable here too, or schedule: constant and no "
               "warmup_epochs");
  }
}

caf::expected<int64_t> planned_training_samples(const topology& t, const std::string& who) {
  if (t.training_samples)
    return *t.training_samples;
  return make_error(errc::bad_config, t.file + ": " + who + " step along a schedule counted "
                                        "from the training samples, and none were counted "
                                        "where the run was read");
}

} // namespace modes
} // namespace baton::actors

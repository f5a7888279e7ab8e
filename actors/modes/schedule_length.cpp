#include "actors/modes/schedule_length.hpp"

#include "messages/errc.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {

std::optional<int64_t> training_samples_here(const topology& t) {
  try {
    return model::data_size(t.data, model::split::train);
  } catch (const model::error&) {
    return std::nullopt;
  }
}

caf::expected<int64_t> planned_training_samples(const topology& t, const std::string& who) {
  if (auto samples = training_samples_here(t))
    return *samples;
  return make_error(errc::bad_config, t.file + ": " + who + " step along a schedule counted "
                                        "from the training samples, and the data cannot be "
                                        "read here");
}

void refuse_unknown_length(const config::detail::field& blame, const model::optimizer_spec& o,
                           const topology& t, const std::string& who) {
  if (!o.scheduled() || training_samples_here(t))
    return;
  blame.fail(blame.name() + ": " + who + " step along the schedule '" + o.schedule +
             "' over the run's steps, which are counted from the training samples where the "
             "run is planned, and this host cannot read the data's headers (" +
             (t.data.kind == "npy" ? t.data.train.x : t.data.path) +
             "); expected the data readable here too, or schedule: constant and no "
             "warmup_epochs");
}

} // namespace modes
} // namespace baton::actors

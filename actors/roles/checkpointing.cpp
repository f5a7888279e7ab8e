#include "actors/roles/checkpointing.hpp"

#include <filesystem>

#include "model/core/error.hpp"

namespace baton::actors {
inline namespace roles {

checkpointing::checkpointing(const recovery_settings& spec) : spec_(spec) {}

bool checkpointing::due(int64_t version) const {
  return spec_.checkpoint_every > 0 && version > 0 && version % spec_.checkpoint_every == 0;
}

void checkpointing::save(model::training_state state, const training_counters& counters) const {
  state.counters = counters.to_json();
  state.run_id = spec_.run_id;
  model::checkpoint_store{spec_.checkpoint_dir}.save(state);
}

std::optional<model::training_state> checkpointing::restore() const {
  if (spec_.restore_step == 0)
    return std::nullopt;
  model::checkpoint_store store{spec_.checkpoint_dir};
  auto state = store.load(spec_.restore_step);
  // Wherever it runs (embedded or on a node), an actor never continues
  // another run's state: two runs on one directory must not mix.
  if (auto why = foreign_checkpoint(store.path_of(spec_.restore_step), state.run_id,
                                    spec_.run_id);
      !why.empty())
    throw model::file_error(why);
  return state;
}

std::string foreign_checkpoint(const std::string& path, const std::string& found,
                               const std::string& expected) {
  if (found.empty() || expected.empty() || found == expected)
    return {};
  return path + " is a checkpoint of run " + found + ", not of this run (" + expected +
         "): a checkpoint directory holds the checkpoints of one run, and another run's "
         "state is never restored";
}

std::string checkpoint_dir_of(const std::string& run_dir, const std::string& name) {
  return (std::filesystem::path(run_dir) / name).string();
}

} // namespace roles
} // namespace baton::actors

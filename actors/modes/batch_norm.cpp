#include "actors/modes/batch_norm.hpp"

namespace baton::actors {
inline namespace modes {

std::optional<int64_t> known_training_samples(const topology& t) {
  if (t.training_samples)
    return t.training_samples;
  if (t.data.train_limit > 0)
    return t.data.train_limit; // the data is on the source's node
  return std::nullopt;
}

void refuse_batch_norm_step(const config::detail::field& blame, int64_t samples,
                            const std::string& how,
                            const std::string& model) {
  if (samples >= 2)
    return;
  blame.fail(how + ", but " + model + " has batch norm, which normalises over the samples of "
             "a step in training and needs at least 2 (expected a batch of at least 2 samples "
             "per step)");
}

config::detail::field data_key_or_root(const config::detail::field& root,
                                       const std::string& key) {
  auto f = root.section("data").get(key);
  return f ? *f : root;
}

} // namespace modes
} // namespace baton::actors

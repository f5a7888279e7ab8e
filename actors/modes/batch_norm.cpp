#include "actors/modes/batch_norm.hpp"

#include <algorithm>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {

std::optional<int64_t> known_training_samples(const topology& t) {
  if (t.data.synthetic())
    return t.data.synthetic_train;
  std::optional<int64_t> limit;
  if (t.data.train_limit > 0)
    limit = t.data.train_limit;
  if (!t.embedded())
    return limit; // the data is on the source's node
  try {
    return model::data_size(t.data, model::split::train); // after the limit
  } catch (const model::error&) {
    return limit; // the parser refuses an unreadable dataset with its own error
  }
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

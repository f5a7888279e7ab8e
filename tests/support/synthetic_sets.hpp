#pragma once

// The synthetic image sets the model suites train and test on, made once
// per process: a suite asks for the same set in many tests, and making it
// again in each would cost more than the small runs that use it.

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "model/core/dataset.hpp"

namespace baton::model::testing {

/// `samples` synthetic images of `channels` x `side` x `side` in 10 classes,
/// drawn with `seed` (the suites' training sets use 3, their test sets 4);
/// made on first use and kept (thread-safe) for the process.
inline const dataset& kept_synthetic(int64_t samples, int64_t channels, int64_t side,
                                     uint64_t seed) {
  static std::mutex guard;
  static std::map<std::tuple<int64_t, int64_t, int64_t, uint64_t>, dataset> made;
  std::lock_guard<std::mutex> lock{guard};
  auto key = std::make_tuple(samples, channels, side, seed);
  auto it = made.find(key);
  if (it == made.end())
    it = made.emplace(key, make_synthetic(samples, channels, side, side, 10, seed)).first;
  return it->second;
}

} // namespace baton::model::testing

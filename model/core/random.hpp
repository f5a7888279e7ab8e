#pragma once

// The random numbers that must come out the same on every machine and
// standard library (synthetic data, epoch orders, initial weights, IST's
// partitions): a seed mixer and an unbiased bounded draw over
// std::mt19937_64, whose output the standard fixes (its distributions it
// does not).

#include <cstdint>
#include <random>

namespace baton::model {

/// SplitMix64's finaliser over `x` plus the golden-ratio increment: spreads
/// the bits of a seed before it seeds a twister, so that nearby seeds give
/// unrelated streams.
uint64_t mix64(uint64_t x);

/// A uniform integer in [0, bound) (bound > 0) from `rng`, unbiased
/// (rejection of the low 2^64 mod bound values) and, unlike
/// std::uniform_int_distribution, the same on every standard library.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound);

} // namespace baton::model

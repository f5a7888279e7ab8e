#include "model/core/random.hpp"

namespace baton::model {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound; // 2^64 mod bound
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % bound;
  }
}

} // namespace baton::model

// Fuzz target: the BASP frame guard (actors/net/frame_guard.hpp) on any byte
// stream, cut into reads of any sizes. What must hold:
//   - the verdict does not depend on how the stream is cut into reads;
//   - it matches a plain reference parse of the same stream (headers,
//     big-endian lengths, the two limits, handshake first);
//   - the handshake budget is whole again once the guards are gone.
//
// Input: byte 0 seeds the read sizes, the rest is the stream. Small limits
// (handshake 64, frame 512 bytes) so that the fuzzer reaches accepted
// payloads, later frames and refusals within its input lengths.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/net/frame_guard.hpp"

namespace {

using baton::actors::basp_header_bytes;
using baton::actors::frame_guard;
using baton::actors::frame_limits;
using baton::actors::handshake_budget;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_frame_guard: %s\n", what.c_str());
  std::abort();
}

constexpr uint32_t handshake_limit = 64;
constexpr uint32_t frame_limit = 512;
constexpr size_t budget_bytes = 100;

frame_limits limits() {
  frame_limits l;
  l.handshake_bytes = handshake_limit;
  l.frame_bytes = frame_limit;
  return l;
}

struct verdict {
  bool refused = false;
  uint64_t frames = 0;
  uint32_t refused_length = 0;
};

/// The reference: walks the stream frame by frame.
verdict reference(const uint8_t* data, size_t size) {
  verdict v;
  size_t at = 0;
  while (size - at >= basp_header_bytes) {
    const uint8_t* h = data + at;
    uint32_t length = (uint32_t{h[4]} << 24) | (uint32_t{h[5]} << 16) | (uint32_t{h[6]} << 8) | h[7];
    bool first = v.frames == 0;
    bool ok = first ? (h[0] <= 1 && length <= handshake_limit && length <= budget_bytes)
                    : length <= frame_limit;
    if (!ok) {
      v.refused = true;
      v.refused_length = length;
      return v;
    }
    at += basp_header_bytes;
    if (size - at < length)
      return v; // payload still arriving
    at += length;
    ++v.frames;
  }
  return v;
}

verdict guarded(const uint8_t* data, size_t size, uint8_t cut_seed, handshake_budget& budget) {
  frame_guard guard{limits(), &budget};
  size_t at = 0;
  uint32_t state = cut_seed * 2654435761u + 1;
  while (at < size) {
    state = state * 1103515245u + 12345u;
    size_t n = cut_seed == 0 ? size - at : 1 + (state >> 16) % 40;
    n = std::min(n, size - at);
    bool accepted = guard.feed(data + at, n);
    if (accepted == guard.refused())
      fail("feed's result disagrees with refused()");
    at += n;
    if (!accepted)
      break;
  }
  return {guard.refused(), guard.frames(), guard.refused_length()};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t cut_seed = data[0];
  ++data;
  --size;
  handshake_budget budget{budget_bytes};
  auto whole = guarded(data, size, 0, budget);
  auto cut = guarded(data, size, cut_seed == 0 ? 1 : cut_seed, budget);
  auto expected = reference(data, size);
  if (budget.available() != budget_bytes)
    fail("the handshake budget was not given back");
  for (const auto& v : {whole, cut})
    if (v.refused != expected.refused || v.frames != expected.frames ||
        v.refused_length != expected.refused_length)
      fail("verdict differs from the reference: refused " + std::to_string(v.refused) + "/" +
           std::to_string(expected.refused) + ", frames " + std::to_string(v.frames) + "/" +
           std::to_string(expected.frames) + ", length " + std::to_string(v.refused_length) +
           "/" + std::to_string(expected.refused_length));
  return 0;
}

#pragma once

// A tensor_set larger than a message may be (messages::default_max_message_bytes)
// sent as parts. An actor's final or per-epoch weights went to the
// coordinator as one message; over TCP (nodes on other hosts, or without
// shared memory) the 20 M-parameter mlp's 80 MB were refused by the sender's
// codec, and `--save-model` ended with "'worker.0' sent no final weights"
// after the whole run. Now a set over `max_part_bytes` is cut into parts
// (whole tensors where they fit, a larger tensor in blocks of rows), each a
// tensor_set of kind "KIND/part" whose first tensor says where its other
// tensors go; the receiver's tensor_set_assembler puts the set back together,
// the same tensors in the same order, bit for bit.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor.hpp>

#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// The tensor bytes of one part: half a message, leaving room for the rest.
inline constexpr uint64_t max_part_bytes = messages::default_max_message_bytes / 2;

/// `w` as it goes on the wire: itself when its tensors take at most
/// `max_bytes`, else parts of kind "KIND/part" of at most `max_bytes` of
/// tensor data each (a tensor larger than that in blocks of its first
/// dimension's rows; one row over it is sent alone, and refused by the codec
/// as before).
std::vector<messages::tensor_set> in_parts(messages::tensor_set w,
                                           uint64_t max_bytes = max_part_bytes);

/// Sends `w` to `to` as in_parts cuts it (one message when it fits).
template <class Actor>
void send_in_parts(Actor* self, const caf::actor& to, messages::tensor_set w) {
  for (auto& part : in_parts(std::move(w)))
    self->send(to, std::move(part));
}

/// Whether `w` is a part (in_parts) to give to a tensor_set_assembler.
bool is_part(const messages::tensor_set& w);

/// Puts the parts of tensor sets back together, any number of senders at once.
class tensor_set_assembler {
public:
  /// Adds `part`; returns the whole set once its last part arrived. A part
  /// that does not fit its set (a malformed header, an index out of range,
  /// rows that overlap or leave a gap, a tensor of another shape) sets
  /// `error` (naming the sender) and drops what arrived of that set.
  std::optional<messages::tensor_set> add(messages::tensor_set part, std::string& error);

  /// `w` itself when it is no part (or was refused in transit: its
  /// `invalid` says why), else add(w): the whole set once complete; a part
  /// that does not fit is logged as a warning.
  std::optional<messages::tensor_set> take(messages::tensor_set w);

private:
  struct pending {
    int64_t parts = 0, tensors = 0;
    std::set<int64_t> arrived_parts;
    /// Original tensor -> its blocks by first row (-1: the tensor whole).
    std::map<int64_t, std::map<int64_t, at::Tensor>> blocks;
    std::map<int64_t, int64_t> rows; ///< original tensor -> its rows (-1: whole)
  };
  /// (sender, kind, replica, step) -> what arrived of that set.
  std::map<std::tuple<std::string, std::string, int32_t, int64_t>, pending> pending_;
};

} // namespace flow
} // namespace baton::actors

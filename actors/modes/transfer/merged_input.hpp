#pragma once

// The order in which a head takes the microbatches of several replicas of
// the frozen backbone (`backbone.replicas`): the source's. No CAF, no
// torch calls: the head holds its inputs here and takes what may go.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "messages/types.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// A microbatch or a control, as a head takes it.
using head_input = std::variant<messages::microbatch, messages::control>;

/// The inputs of a head fed by `replicas` replicas of the backbone's last
/// stage, put back in the source's order. The source deals in turns
/// (flow::dealing::turns: microbatch `id` to replica `turn_of(id, replicas)`), each
/// replica's outputs arrive in id order, and every control comes once from
/// each replica, after that replica's microbatches before it. So:
///   - the lowest id held may go once every replica has a microbatch held
///     (nothing lower can come from any of them);
///   - a control may go once all its copies came: every microbatch before
///     it has come by then, and those of its epoch or earlier go first, in
///     id order.
/// With one replica this is the order of arrival. A microbatch that never
/// comes (a drop fault) holds nothing up for long: the next from its
/// replica, or the epoch's control, lets the ones after it go, and the
/// head finds the gap as without replicas.
class merged_input {
public:
  explicit merged_input(int32_t replicas);

  void add(messages::microbatch m);
  void add(messages::control c);

  /// The next input that may go, taken out; nullopt while none may.
  std::optional<head_input> next();

  /// Microbatches held (not yet taken).
  size_t held() const;

private:
  /// The held microbatch with the lowest id among replicas' fronts
  /// (nullptr when none is held); `only_epoch_to`: of that epoch or before.
  std::deque<messages::microbatch>* lowest(std::optional<int32_t> only_epoch_to);

  std::vector<std::deque<messages::microbatch>> by_replica_;
  /// Controls in order, with how many of their copies came.
  std::deque<std::pair<messages::control, int32_t>> controls_;
};

} // namespace transfer
} // namespace modes
} // namespace baton::actors

#pragma once

// The faults a role injects on itself (docs/faults-and-recovery.md): a throw at a step,
// a delay or drop on one of its edges, a kill or stop of its process.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/result.hpp>

#include "actors/config/role_settings.hpp"
#include "messages/errc.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace roles {

/// Fault injection: throws (as a failing LibTorch call would) when training
/// microbatch `m` opens step spec.throw_at_step.
void maybe_throw_fault(const recovery_settings& spec, const messages::microbatch& m);

/// Fault injection on a sender's edge: (fault_atom, "delay" | "drop", to,
/// value) sets `downstream`'s delay (value ms) or drop step (value) to
/// receiver `to`.
template <class Fanout>
caf::result<caf::ok_atom> inject_edge_fault(Fanout& downstream, const std::string& from,
                                            const std::string& kind, const std::string& to,
                                            int64_t value) {
  bool ok = kind == "delay"   ? downstream.inject(to, std::chrono::milliseconds(value), -1)
            : kind == "drop" ? downstream.inject(to, std::chrono::milliseconds(0), value)
                             : false;
  if (!ok)
    return make_error(errc::bad_config, from + ": cannot inject '" + kind + "' on the edge to '" +
                                          to + "' (no such receiver or kind)");
  return caf::ok_atom::value;
}

/// Fault injection on a node, in its own process: "kill" SIGKILLs it; "stop"
/// SIGSTOPs it and a forked child SIGCONTs it after `ms` milliseconds.
caf::error inject_process_fault(const std::string& kind, int32_t ms);

} // namespace roles
} // namespace baton::actors

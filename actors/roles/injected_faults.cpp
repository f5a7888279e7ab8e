#include "actors/roles/injected_faults.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace baton::actors {
inline namespace roles {

void maybe_throw_fault(const recovery_settings& spec, const messages::microbatch& m) {
  if (!m.eval && m.step == spec.throw_at_step && m.index_in_step == 0)
    throw std::runtime_error("injected fault: throw at step " + std::to_string(m.step));
}

caf::error inject_process_fault(const std::string& kind, int32_t ms) {
  if (kind == "kill") {
    ::kill(::getpid(), SIGKILL);
    return caf::none;
  }
  if (kind != "stop" || ms <= 0)
    return make_error(errc::bad_config, "unknown process fault '" + kind + "' (kill, stop)");
  auto parent = ::getpid();
  auto child = ::fork();
  if (child < 0)
    return make_error(errc::actor_failed, std::string{"fork for the stop fault failed: "} +
                                            std::strerror(errno));
  if (child == 0) {
    // Only async-signal-safe calls in the child of a threaded process.
    timespec t{ms / 1000, (ms % 1000) * 1000000L};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    ::kill(parent, SIGCONT);
    ::_exit(0);
  }
  ::kill(parent, SIGSTOP);
  // Running again: reap the child.
  ::waitpid(child, nullptr, 0);
  return caf::none;
}

} // namespace roles
} // namespace baton::actors

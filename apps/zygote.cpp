#include "apps/zygote.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/core/fd_io.hpp"

namespace baton::apps {

namespace {

/// Its bound: a request is a command line and an environment.
constexpr uint32_t largest_request = 16u << 20;

/// A command to start: its standard streams and its NUL-ended strings.
struct request {
  std::array<int, 3> streams{-1, -1, -1};
  std::string cwd;
  std::vector<std::string> args;
  std::vector<std::string> env;

  void close_streams() {
    for (int& fd : streams)
      if (fd >= 0)
        ::close(std::exchange(fd, -1));
  }
};

/// Receives a request: the length with the three descriptors, then the
/// strings. False (and nothing left open) when it is not one.
bool receive(int connection, request& r) {
  uint32_t length = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  iovec io{&length, sizeof length};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(connection, &message, MSG_CMSG_CLOEXEC);
  if (got <= 0)
    return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(3 * sizeof(int)))
      std::memcpy(r.streams.data(), CMSG_DATA(c), 3 * sizeof(int));
  char* const length_bytes = reinterpret_cast<char*>(&length);
  bool whole = r.streams[0] >= 0 &&
               (got == sizeof length ||
                model::read_all(connection, length_bytes + got,
                                sizeof length - static_cast<size_t>(got))) &&
               length <= largest_request;
  std::string payload;
  if (whole) {
    payload.resize(length);
    whole = model::read_all(connection, payload.data(), length);
  }
  std::vector<std::string> parts;
  for (size_t begin = 0; whole && begin < payload.size();) {
    const size_t end = payload.find('\0', begin);
    if (end == std::string::npos)
      break;
    parts.push_back(payload.substr(begin, end - begin));
    begin = end + 1;
  }
  size_t count = 0;
  if (parts.size() >= 3)
    count = std::strtoul(parts[1].c_str(), nullptr, 10);
  if (!whole || count == 0 || parts.size() < 2 + count) {
    r.close_streams();
    return false;
  }
  r.cwd = parts[0];
  r.args.assign(parts.begin() + 2, parts.begin() + 2 + static_cast<std::ptrdiff_t>(count));
  r.env.assign(parts.begin() + 2 + static_cast<std::ptrdiff_t>(count), parts.end());
  return true;
}

/// In the forked child: becomes the command the request names, as a fresh
/// `baton` process would be, and runs it.
[[noreturn]] void become(request& r, const sigset_t& mask_before, command_main body) {
  ::setpgid(0, 0);
  for (int i = 0; i < 3; ++i)
    ::dup2(r.streams[static_cast<size_t>(i)], i); // the copies are not close-on-exec
  r.close_streams();
  if (::chdir(r.cwd.c_str()) != 0) {
    std::fprintf(stderr, "baton zygote: cannot enter %s: %s\n", r.cwd.c_str(),
                 std::strerror(errno));
    std::_Exit(127);
  }
  ::clearenv();
  for (auto& variable : r.env)
    ::putenv(variable.data()); // r lives until exit
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  ::sigprocmask(SIG_SETMASK, &mask_before, nullptr);
  std::vector<char*> argv;
  for (auto& a : r.args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(body(static_cast<int>(r.args.size()), argv.data()));
}

int listen_on(const char* socket_path) {
  sockaddr_un address{};
  if (std::strlen(socket_path) >= sizeof address.sun_path)
    return -1;
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, socket_path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 64) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

int serve_zygote(const char* socket_path, command_main body) {
  const pid_t starter = ::getppid();
  // SIGCHLD through a descriptor: the loop waits on the socket and the
  // children's ends alike; each child gets the mask it had back.
  sigset_t child_ended, mask_before;
  sigemptyset(&child_ended);
  sigaddset(&child_ended, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &child_ended, &mask_before);
  const int ended = ::signalfd(-1, &child_ended, SFD_CLOEXEC | SFD_NONBLOCK);
  const int listener = listen_on(socket_path);
  if (ended < 0 || listener < 0) {
    std::fprintf(stderr, "baton zygote: cannot listen on %s: %s\n", socket_path,
                 std::strerror(errno));
    return 1;
  }
  std::map<pid_t, int> answers; // a running child -> the connection awaiting its end
  while (::getppid() == starter) {
    std::array<pollfd, 2> ready{{{listener, POLLIN, 0}, {ended, POLLIN, 0}}};
    if (::poll(ready.data(), ready.size(), 1000) < 0 && errno != EINTR)
      break;
    if (ready[1].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(ended, &info, sizeof info) == sizeof info) {
      }
      int status = 0;
      rusage usage{};
      pid_t pid;
      while ((pid = ::wait4(-1, &status, WNOHANG, &usage)) > 0) {
        auto at = answers.find(pid);
        if (at == answers.end())
          continue;
        const int64_t peak_kb = usage.ru_maxrss;
        const int answer = at->second;
        model::write_all(answer, reinterpret_cast<const char*>(&status), sizeof status);
        model::write_all(answer, reinterpret_cast<const char*>(&peak_kb), sizeof peak_kb);
        ::close(at->second);
        answers.erase(at);
      }
    }
    if (!(ready[0].revents & POLLIN))
      continue;
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0)
      continue;
    request r;
    if (!receive(connection, r)) {
      ::close(connection);
      continue;
    }
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(listener);
      ::close(ended);
      ::close(connection);
      for (const auto& [pid, fd] : answers)
        ::close(fd);
      become(r, mask_before, body);
    }
    r.close_streams();
    const int32_t told = child;
    if (child < 0 ||
        !model::write_all(connection, reinterpret_cast<const char*>(&told), sizeof told)) {
      ::close(connection);
      continue;
    }
    answers[child] = connection;
  }
  return 0;
}

} // namespace baton::apps

#include "tests/support/zygote.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "model/core/fd_io.hpp"

extern char** environ;

namespace baton::testing {

namespace {

/// Whether a library (or baton's tensor heap) reads `variable` as it loads,
/// before `main`: a child of the zygote has the value the zygote started with.
bool read_at_load(const std::string& variable) {
  for (const char* prefix :
       {"OMP_", "GOMP_", "MALLOC_", "LD_", "OPENBLAS_", "GLIBC_TUNABLES", "BATON_TENSOR_HEAP"})
    if (variable.rfind(prefix, 0) == 0)
      return true;
  return false;
}

std::vector<std::string> read_at_load_now() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e)
    if (read_at_load(*e))
      out.emplace_back(*e);
  std::sort(out.begin(), out.end());
  return out;
}

/// A connection to the zygote's socket; -1 when it does not answer.
int connect_to(const std::string& socket_path) {
  sockaddr_un address{};
  if (socket_path.size() >= sizeof address.sun_path)
    return -1;
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, socket_path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
    return fd;
  if (fd >= 0)
    ::close(fd);
  return -1;
}

/// The suite's zygote: started at the first command, killed as the suite's
/// process exits. (It also ends by itself within a second of that process.)
class zygote {
public:
  static zygote& instance() {
    static zygote z;
    return z;
  }

  zygote(const zygote&) = delete;
  zygote& operator=(const zygote&) = delete;

  ~zygote() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    if (!dir_.empty())
      std::filesystem::remove_all(dir_, ignored);
  }

  bool ready() const { return pid_ > 0; }
  const std::string& socket_path() const { return socket_path_; }
  /// Its variables read at load (read_at_load), as it started.
  const std::vector<std::string>& loaded_with() const { return loaded_with_; }

private:
  zygote() {
    const char* off = std::getenv("BATON_TEST_NO_ZYGOTE");
    if (off != nullptr && *off != '\0' && std::string{off} != "0")
      return;
    std::string pattern = std::filesystem::temp_directory_path() / "baton-zygote-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      return;
    dir_ = pattern;
    socket_path_ = dir_ + "/socket";
    loaded_with_ = read_at_load_now();
    std::string variable = "BATON_TEST_ZYGOTE=" + socket_path_;
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e)
      envp.push_back(*e);
    envp.push_back(variable.data());
    envp.push_back(nullptr);
    std::array<char*, 2> argv{const_cast<char*>(BATON_BINARY), nullptr};
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_ = ::fork();
    if (pid_ == 0) { // only async-signal-safe calls until execve
      ::setpgid(0, 0); // a signal to the suite's group does not reach it
      ::dup2(null, STDIN_FILENO);
      ::execve(BATON_BINARY, argv.data(), envp.data());
      ::_exit(127);
    }
    if (null >= 0)
      ::close(null);
    if (pid_ < 0)
      return;
    // Up once it accepts a connection (it loads LibTorch first: ~1 s).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (const int probe = connect_to(socket_path_); probe >= 0) {
        ::close(probe);
        return;
      }
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_path_;
  std::vector<std::string> loaded_with_;
};

} // namespace

std::optional<zygote_child> zygote_start(const std::vector<std::string>& args, int output) {
  auto& z = zygote::instance();
  if (!z.ready() || read_at_load_now() != z.loaded_with())
    return std::nullopt;
  std::error_code no_cwd;
  const std::string cwd = std::filesystem::current_path(no_cwd);
  std::string payload = cwd + '\0' + std::to_string(args.size() + 1) + '\0' + BATON_BINARY + '\0';
  for (const auto& a : args)
    payload += a + '\0';
  for (char** e = environ; *e != nullptr; ++e)
    payload += std::string{*e} + '\0';
  const int connection = connect_to(z.socket_path());
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (no_cwd || connection < 0 || null < 0) {
    for (int fd : {connection, null})
      if (fd >= 0)
        ::close(fd);
    return std::nullopt;
  }
  // The length, with the child's stdin, stdout and stderr.
  auto length = static_cast<uint32_t>(payload.size());
  std::array<int, 3> streams{null, output, output};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof streams)] = {};
  iovec io{&length, sizeof length};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof streams);
  std::memcpy(CMSG_DATA(c), streams.data(), sizeof streams);
  const bool sent = ::sendmsg(connection, &message, MSG_NOSIGNAL) == sizeof length &&
                    model::write_all(connection, payload.data(), payload.size());
  ::close(null);
  int32_t pid = -1;
  if (!sent || !model::read_all(connection, reinterpret_cast<char*>(&pid), sizeof pid) ||
      pid <= 0) {
    ::close(connection);
    return std::nullopt;
  }
  return zygote_child{pid, connection};
}

std::pair<int, int64_t> zygote_wait(zygote_child& child) {
  int32_t status = -1;
  int64_t peak_kb = -1;
  const bool told =
    model::read_all(child.connection, reinterpret_cast<char*>(&status), sizeof status) &&
    model::read_all(child.connection, reinterpret_cast<char*>(&peak_kb), sizeof peak_kb);
  ::close(child.connection);
  child.connection = -1;
  if (!told)
    return {-1, -1};
  return {status, peak_kb};
}

} // namespace baton::testing

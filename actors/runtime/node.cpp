#include "actors/runtime/node.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/yaml_field.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/runtime/rendezvous.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/data_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// A node name is printed in logs, matched against `nodes:` and against TLS
/// certificate names: the rule of every name (actors/config/names.hpp).
caf::error check_node_name(const std::string& name) {
  if (std::string why = check_name(name); !why.empty())
    return make_error(errc::bad_config, "node name " + detail::quoted(name) + " must be "
                                        + name_rule() + " (" + why + ")");
  if (reserved_name(name))
    return make_error(errc::bad_config, "node name " + detail::quoted(name) + " is one of the "
                                        "names baton gives its own actors and nodes ("
                                        + reserved_names() + ", in any case)");
  if (reserved_file_name(name))
    return make_error(errc::bad_config, "node name " + detail::quoted(name) + " is the name "
                                        "of a file of the checkpoint directory ("
                                        + reserved_file_names() + ", in any case)");
  return caf::none;
}

/// Writes `port` to `path` through a temporary file renamed over it, so that
/// a launcher polling for the file never reads half of it; a full disk
/// leaves no temporary file behind.
caf::error write_port_file(const std::string& path, uint16_t port) {
  std::string why = model::try_replace_file(path, std::to_string(port) + "\n");
  if (!why.empty())
    return make_error(errc::bad_file, "--port-file " + path + ": " + why);
  return caf::none;
}

/// What CAF or a spawn request would otherwise fail on later: a bad name, TLS
/// files and path roots that do not exist, a port file that cannot be written.
caf::error check_node_settings(const node_settings& s) {
  if (auto err = check_node_name(s.name))
    return err;
  // CAF aborts the process when it cannot create a scheduler thread.
  if (s.system.scheduler_threads < 1 || s.system.scheduler_threads > max_scheduler_threads)
    return make_error(errc::bad_config,
                      "scheduler threads (--scheduler-threads or scheduler_threads) must be "
                      "from 1 to " + std::to_string(max_scheduler_threads) + ", got " +
                        std::to_string(s.system.scheduler_threads));
  // Without TLS whoever reaches the port may spawn actors that read this
  // host's files: beyond loopback that takes an explicit --insecure.
  if (!s.system.tls.enabled() && !s.insecure && !loopback_only(s.host))
    return make_error(errc::bad_config,
                      "no TLS on " + s.host + ", which is not a loopback address: anyone "
                      "who reaches it could spawn actors here; give --tls-cert, --tls-key and "
                      "--tls-ca (see `baton certs` and docs/security.md), or --insecure to "
                      "serve without authentication on a trusted network");
  if (!s.tls_allow.empty() && !s.system.tls.enabled())
    return make_error(errc::bad_config, "tls.allow needs TLS: give tls.certificate, tls.key and "
                                        "tls.ca (or --tls-cert, --tls-key, --tls-ca)");
  if (s.system.tls.enabled())
    if (auto err = check_tls_files(s.system.tls))
      return err;
  auto roots = s.paths.data_dirs;
  if (!s.paths.checkpoint_dir.empty())
    roots.push_back(s.paths.checkpoint_dir);
  for (const auto& root : roots)
    if (std::error_code ec; !std::filesystem::is_directory(root, ec))
      return make_error(errc::bad_config, "'" + root + "' (data_dirs or checkpoint_dir) is not "
                                          "a directory");
  // Before listening: a launcher waits for this file, so a node that cannot
  // write it must say so instead of serving without it.
  if (!s.port_file.empty()) {
    if (auto why = model::missing_directory(s.port_file); !why.empty())
      return make_error(errc::bad_file, "--port-file " + s.port_file + ": " + why);
    // Through a new temporary file, as the write: never PORT_FILE.tmp, which
    // a link put there would have had the check truncate.
    if (auto why = model::try_check_writable(s.port_file); !why.empty())
      return make_error(errc::bad_file, "--port-file " + s.port_file + ": " + why);
  }
  return caf::none;
}

/// Says once what the node does not restrict.
void log_restrictions(const node_settings& s) {
  std::string open;
  if (s.paths.data_dirs.empty())
    open = "no data_dirs (datasets)";
  if (s.paths.checkpoint_dir.empty())
    open += (open.empty() ? "" : ", ") + std::string{"no checkpoint_dir (checkpoints, TorchScript)"};
  if (!open.empty())
    spdlog::warn("node {}: unrestricted paths: {}; spawned actors may read such files anywhere "
                 "this process can",
                 s.name, open);
  if (!s.system.tls.enabled())
    spdlog::warn("node {}: no TLS{}: any process that reaches {} may spawn actors here", s.name,
                 s.insecure ? " (--insecure)" : "", s.host);
}

caf::expected<uint16_t> publish(caf::actor_system& sys, const node_settings& s,
                                const caf::actor& spawner) {
  // A plain port next to a TLS one would be an unauthenticated way in.
  if (s.system.tls.enabled())
    return caf::openssl::publish(spawner, s.port, s.host.c_str(), true);
  // Plain TCP through the transport that refuses oversized BASP frames.
  return publish_framed(sys, spawner, s.port, s.host);
}

/// Why `host`:`port` cannot be listened on, as the kernel says it: CAF
/// says only "tcp socket creation failed". Binds a socket of its own (with
/// SO_REUSEADDR, as CAF does); "" when that works now or the host does not
/// resolve (CAF's error then says enough).
std::string bind_failure(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int failed = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      failed != 0)
    return "'" + host + "' is no address of this host (" + ::gai_strerror(failed) +
           "): give --host one of its names or addresses, 0.0.0.0 or 127.0.0.1";
  int error = 0;
  int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  int on = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      ::bind(fd, found->ai_addr, found->ai_addrlen) != 0)
    error = errno;
  if (fd >= 0)
    ::close(fd);
  ::freeaddrinfo(found);
  if (error == EADDRINUSE)
    return "address in use: another process listens on port " + std::to_string(port) +
           " (choose another --port, or --port 0 for one the system picks)";
  if (error == EACCES)
    return "permission denied: ports below 1024 need root (choose a port above 1023, or "
           "--port 0)";
  return error == 0 ? std::string{} : std::strerror(error);
}

} // namespace

int run_node(const node_settings& settings, const std::atomic<bool>& stop,
             const std::vector<role_type>& roles) {
  // Before the actor system: CAF aborts on a certificate it cannot load.
  if (auto err = check_node_settings(settings)) {
    spdlog::error("node {}: {}", settings.name, describe(err));
    return 2;
  }
  log_restrictions(settings);
  // The data readers check every file and folder they open against data_dirs
  // (resolved), not only the dataset directory the spawn request names.
  model::set_data_roots(settings.paths.data_dirs);
  if (settings.system.shared_memory) {
    messages::use_shared_memory(true);
    spdlog::info("node {}: tensors of 1 MiB or more to and from the processes of this host go "
                 "through /dev/shm (shared_memory)", settings.name);
  }
  caf::actor_system_config cfg;
  configure(cfg, settings.system);
  caf::actor_system sys{cfg};
  auto spawner = spawn_spawner(sys, settings.name,
                               {roles, settings.paths, settings.system.tls, settings.tls_allow});
  auto port = publish(sys, settings, spawner);
  if (!port) {
    const auto why = bind_failure(settings.host, settings.port);
    spdlog::error("node {}: cannot listen on {}:{}: {}", settings.name, settings.host,
                  settings.port, why.empty() ? sys.render(port.error()) : why);
    caf::anon_send_exit(spawner, caf::exit_reason::kill);
    return 2;
  }
  std::printf("baton node %s listening on %s:%u%s\n", settings.name.c_str(),
              settings.host.c_str(), static_cast<unsigned>(*port),
              settings.system.tls.enabled() ? " with TLS" : "");
  std::fflush(stdout);
  if (!settings.port_file.empty())
    if (auto err = write_port_file(settings.port_file, *port)) {
      spdlog::error("node {}: {}", settings.name, describe(err));
      caf::anon_send_exit(spawner, caf::exit_reason::kill);
      return 2;
    }
  if (settings.listening)
    settings.listening(*port);
  while (!stop.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("node {}: stopping", settings.name);
  // Killing the spawner kills every actor it started (they are linked).
  caf::anon_send_exit(spawner, caf::exit_reason::kill);
  // TLS ports share the middleman's BASP broker, which closes them too.
  sys.middleman().unpublish(spawner, *port);
  return 0;
}

} // namespace runtime
} // namespace baton::actors

#include "actors/runtime/node.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <netdb.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "actors/config/yaml_field.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/errc.hpp"

namespace baton::actors {

namespace {

caf::error node_error(const std::string& path, const YAML::Node& n, const std::string& what) {
  return make_error(errc::bad_config,
                    path + ":" + std::to_string(n.Mark().line + 1) + ": " + what);
}

/// The key of a map entry: yaml-cpp throws on as<std::string>() of a key that
/// is a list or a map (`[a]: 1`), which must be a bad_config value instead.
caf::expected<std::string> key_of(const std::string& path, const YAML::Node& key) {
  if (key.IsScalar())
    return key.Scalar();
  const char* got = key.IsMap() ? "a map" : key.IsSequence() ? "a list" : "nothing";
  return node_error(path, key, std::string{"expected a key name, got "} + got);
}

/// Reads an integer from 1 to `max` (at most what T holds).
template <class T>
caf::error read_positive(const std::string& path, const YAML::Node& n, const char* key, T& out,
                         int64_t max = static_cast<int64_t>(std::numeric_limits<T>::max())) {
  try {
    auto value = n.as<int64_t>();
    if (value <= 0 || value > max)
      throw std::out_of_range("out of range");
    out = static_cast<T>(value);
    return caf::none;
  } catch (const std::exception&) {
    return node_error(path, n, std::string{"'"} + key + "' must be an integer from 1 to " +
                                 std::to_string(max));
  }
}

/// `p` relative to the directory of the node file `path`.
std::string resolve(const std::string& path, const std::string& p) {
  namespace fs = std::filesystem;
  return fs::absolute(fs::path{path}.parent_path() / p).lexically_normal().string();
}

caf::error read_path(const std::string& path, const YAML::Node& n, const std::string& key,
                     std::string& out) {
  if (!n.IsScalar() || n.Scalar().empty())
    return node_error(path, n, "'" + key + "' must be a path");
  out = resolve(path, n.Scalar());
  return caf::none;
}

caf::error read_list(const std::string& path, const YAML::Node& n, const std::string& key,
                     std::vector<std::string>& out, bool paths) {
  if (!n.IsSequence())
    return node_error(path, n, "'" + key + "' must be a list, e.g. [a, b]");
  for (const auto& item : n) {
    if (!item.IsScalar() || item.Scalar().empty())
      return node_error(path, item, "every entry of '" + key + "' must be a non-empty string");
    out.push_back(paths ? resolve(path, item.Scalar()) : item.Scalar());
  }
  return caf::none;
}

/// The `tls:` section: certificate, key, ca (paths) and allow (names).
caf::error read_tls(const std::string& path, const YAML::Node& n, node_settings& s) {
  if (!n.IsMap())
    return node_error(path, n, "'tls' must be a map {certificate, key, ca, allow}");
  auto& tls = s.system.tls;
  for (const auto& kv : n) {
    auto name = key_of(path, kv.first);
    if (!name)
      return std::move(name.error());
    const std::string& key = *name;
    const auto& v = kv.second;
    caf::error err;
    if (key == "certificate")
      err = read_path(path, v, "tls.certificate", tls.certificate);
    else if (key == "key")
      err = read_path(path, v, "tls.key", tls.key);
    else if (key == "ca")
      err = read_path(path, v, "tls.ca", tls.ca);
    else if (key == "allow")
      err = read_list(path, v, "tls.allow", s.tls_allow, false);
    else
      err = node_error(path, kv.first, "unknown key '" + key + "' in 'tls' (expected one of: "
                                       "certificate, key, ca, allow)");
    if (err)
      return err;
  }
  return caf::none;
}

/// A node name is printed in logs, matched against `nodes:` and against TLS
/// certificate names: 1 to 64 letters, digits, '.', '_' or '-'.
caf::error check_node_name(const std::string& name) {
  auto allowed = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  };
  if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), allowed))
    return make_error(errc::bad_config, "node name '" + name.substr(0, 64) + "' must be 1 to 64 "
                                        "letters, digits, '.', '_' or '-'");
  return caf::none;
}

/// Writes `port` to `path` through a temporary file renamed over it, so that
/// a launcher polling for the file never reads half of it.
caf::error write_port_file(const std::string& path, uint16_t port) {
  auto tmp = path + ".tmp";
  {
    std::ofstream out{tmp};
    out << port << '\n';
    if (!out.flush())
      return make_error(errc::bad_file, "--port-file " + path + ": cannot write " + tmp + " (" +
                                          std::strerror(errno) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    auto reason = std::strerror(errno);
    std::remove(tmp.c_str());
    return make_error(errc::bad_file, "--port-file " + path + ": cannot rename " + tmp +
                                        " over it (" + reason + ")");
  }
  return caf::none;
}

/// True if every address `host` resolves to is a loopback address (127/8,
/// ::1): only processes on this machine can reach a port there.
bool loopback_only(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0)
    return false;
  bool loopback = true;
  for (auto a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      loopback = loopback && (ip >> 24) == 127;
    } else {
      auto& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      loopback = loopback && a->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&ip);
    }
  }
  ::freeaddrinfo(found);
  return loopback;
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
                      "--tls-ca (see `baton certs` and README \"Security\"), or --insecure to "
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
    if (std::error_code ec; std::filesystem::is_directory(s.port_file, ec))
      return make_error(errc::bad_file, "--port-file " + s.port_file + " is a directory");
    auto tmp = s.port_file + ".tmp";
    if (!std::ofstream{tmp})
      return make_error(errc::bad_file, "--port-file " + s.port_file + ": cannot create " + tmp +
                                          " (" + std::strerror(errno) + ")");
    std::remove(tmp.c_str());
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

} // namespace

caf::expected<node_settings> load_node_settings(const std::string& path) {
  // Bounded and regular files only, as a topology: `--config /dev/zero`
  // would otherwise read forever.
  std::string text;
  if (std::string why = detail::read_config_file(path, text); !why.empty())
    return make_error(errc::bad_config, "cannot read node file '" + path + "': " + why);
  return parse_node_settings(text, path);
}

caf::expected<node_settings> parse_node_settings(const std::string& yaml_text,
                                                 const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_config, path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!doc.IsMap())
    return node_error(path, doc, "expected a map of node settings");
  node_settings s;
  for (const auto& kv : doc) {
    auto name = key_of(path, kv.first);
    if (!name)
      return std::move(name.error());
    const std::string& key = *name;
    const auto& v = kv.second;
    caf::error err;
    int64_t ms = 0;
    if (key == "name" && v.IsScalar())
      s.name = v.as<std::string>();
    else if (key == "host" && v.IsScalar())
      s.host = v.as<std::string>();
    else if (key == "port")
      err = read_positive(path, v, "port", s.port);
    else if (key == "scheduler_threads")
      err = read_positive(path, v, "scheduler_threads", s.system.scheduler_threads,
                          max_scheduler_threads);
    else if (key == "heartbeat_ms" && !(err = read_positive(path, v, "heartbeat_ms", ms)))
      s.system.heartbeat_interval = std::chrono::milliseconds{ms};
    else if (key == "connection_timeout_ms" &&
             !(err = read_positive(path, v, "connection_timeout_ms", ms)))
      s.system.connection_timeout = std::chrono::milliseconds{ms};
    else if (key == "tls")
      err = read_tls(path, v, s);
    else if (key == "data_dirs")
      err = read_list(path, v, "data_dirs", s.paths.data_dirs, true);
    else if (key == "checkpoint_dir")
      err = read_path(path, v, "checkpoint_dir", s.paths.checkpoint_dir);
    else if (key != "heartbeat_ms" && key != "connection_timeout_ms")
      return node_error(path, kv.first,
                        "unknown key '" + key + "' (expected one of: name, host, port, "
                        "scheduler_threads, heartbeat_ms, connection_timeout_ms, tls, "
                        "data_dirs, checkpoint_dir)");
    if (err)
      return err;
  }
  return s;
}

int run_node(const node_settings& settings, const std::atomic<bool>& stop,
             const std::vector<role_type>& roles) {
  // Before the actor system: CAF aborts on a certificate it cannot load.
  if (auto err = check_node_settings(settings)) {
    spdlog::error("node {}: {}", settings.name, describe(err));
    return 2;
  }
  log_restrictions(settings);
  caf::actor_system_config cfg;
  configure(cfg, settings.system);
  caf::actor_system sys{cfg};
  auto spawner = spawn_spawner(sys, settings.name,
                               {roles, settings.paths, settings.system.tls, settings.tls_allow});
  auto port = publish(sys, settings, spawner);
  if (!port) {
    spdlog::error("node {}: cannot listen on {}:{}: {}", settings.name, settings.host,
                  settings.port, sys.render(port.error()));
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
  while (!stop.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("node {}: stopping", settings.name);
  // Killing the spawner kills every actor it started (they are linked).
  caf::anon_send_exit(spawner, caf::exit_reason::kill);
  // TLS ports share the middleman's BASP broker, which closes them too.
  sys.middleman().unpublish(spawner, *port);
  return 0;
}

} // namespace baton::actors

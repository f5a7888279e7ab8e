#include "actors/node.hpp"

#include <cstdio>
#include <fstream>
#include <limits>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "actors/spawner.hpp"
#include "messages/errc.hpp"

namespace baton::actors {

namespace {

caf::error node_error(const std::string& path, const YAML::Node& n, const std::string& what) {
  return make_error(errc::bad_config,
                    path + ":" + std::to_string(n.Mark().line + 1) + ": " + what);
}

/// Reads a positive integer no larger than what T holds.
template <class T>
caf::error read_positive(const std::string& path, const YAML::Node& n, const char* key, T& out) {
  constexpr auto max = static_cast<int64_t>(std::numeric_limits<T>::max());
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

} // namespace

caf::expected<node_settings> load_node_settings(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return make_error(errc::bad_config, "cannot read node file '" + path + "'");
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_config, path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!doc.IsMap())
    return node_error(path, doc, "expected a map of node settings");
  node_settings s;
  for (const auto& kv : doc) {
    auto key = kv.first.as<std::string>();
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
      err = read_positive(path, v, "scheduler_threads", s.system.scheduler_threads);
    else if (key == "heartbeat_ms" && !(err = read_positive(path, v, "heartbeat_ms", ms)))
      s.system.heartbeat_interval = std::chrono::milliseconds{ms};
    else if (key == "connection_timeout_ms" &&
             !(err = read_positive(path, v, "connection_timeout_ms", ms)))
      s.system.connection_timeout = std::chrono::milliseconds{ms};
    else if (key != "heartbeat_ms" && key != "connection_timeout_ms")
      return node_error(path, kv.first,
                        "unknown key '" + key + "' (expected one of: name, host, port, "
                        "scheduler_threads, heartbeat_ms, connection_timeout_ms)");
    if (err)
      return err;
  }
  return s;
}

int run_node(const node_settings& settings, const std::atomic<bool>& stop) {
  caf::actor_system_config cfg;
  configure(cfg, settings.system);
  caf::actor_system sys{cfg};
  auto spawner = spawn_spawner(sys, settings.name);
  auto port = sys.middleman().publish(spawner, settings.port, settings.host.c_str(), true);
  if (!port) {
    spdlog::error("node {}: cannot listen on {}:{}: {}", settings.name, settings.host,
                  settings.port, sys.render(port.error()));
    caf::anon_send_exit(spawner, caf::exit_reason::kill);
    return 2;
  }
  std::printf("baton node %s listening on %s:%u\n", settings.name.c_str(),
              settings.host.c_str(), static_cast<unsigned>(*port));
  std::fflush(stdout);
  if (!settings.port_file.empty()) {
    auto tmp = settings.port_file + ".tmp";
    std::ofstream{tmp} << *port << '\n';
    std::rename(tmp.c_str(), settings.port_file.c_str());
  }
  while (!stop.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("node {}: stopping", settings.name);
  // Killing the spawner kills every actor it started (they are linked).
  caf::anon_send_exit(spawner, caf::exit_reason::kill);
  sys.middleman().unpublish(spawner, *port);
  return 0;
}

} // namespace baton::actors

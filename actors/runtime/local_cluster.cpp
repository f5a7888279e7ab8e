#include "actors/runtime/local_cluster.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/net/certs.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// Waits for `child` to write its port file; fails if it exits first.
caf::expected<uint16_t> await_port(child_process& child, const std::string& port_file,
                                   const std::string& name) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in{port_file};
    unsigned port = 0;
    if (in >> port && port > 0 && port < 65536)
      return static_cast<uint16_t>(port);
    if (!child.running())
      return make_error(errc::node_unreachable, "local node " + name + " exited (code " +
                                                  std::to_string(child.wait()) +
                                                  ") before listening; its log:\n" +
                                                  child.log_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return make_error(errc::node_unreachable,
                    "local node " + name + " did not listen within 30 s; its log:\n" +
                      child.log_tail());
}

/// With TLS, node `name` gets its own certificate from the directory of the
/// run's certificate (DIR/NAME.pem and DIR/NAME.key, as `baton certs issue
/// NAME --dir DIR` makes them), the run's CA, and accepts only the run's
/// certificate name (tls.allow). Its name must be in its certificate: the
/// coordinator checks that as for any node.
caf::expected<std::vector<std::string>> tls_flags(const tls_settings& run, const std::string& name) {
  if (!run.enabled())
    return std::vector<std::string>{};
  auto dir = std::filesystem::path{run.certificate}.parent_path().string();
  auto files = issued_files(name, dir);
  for (const auto& path : {files.certificate, files.key})
    if (!std::filesystem::exists(path))
      return make_error(errc::bad_config,
                        "--local-nodes with TLS: local node " + name + " needs '" + path +
                          "' next to this run's certificate (make it with `baton certs issue " +
                          name + " --dir " + dir + "`)");
  auto own = read_certificate(run.certificate);
  if (!own)
    return own.error();
  auto names = certificate_names(own->get());
  std::vector<std::string> flags{"--tls-cert", files.certificate, "--tls-key", files.key,
                                 "--tls-ca", run.ca};
  if (!names.empty())
    flags.insert(flags.end(), {"--tls-allow", names.front()});
  return flags;
}

/// The emulated hosts of `--link`, after removing those of crashed runs.
caf::expected<std::unique_ptr<emulated_hosts>> make_emulated_hosts(int32_t count,
                                                                   const link_spec& link) {
  if (::geteuid() != 0)
    return make_error(errc::bad_config,
                      "--link " + link.text + " needs root: it creates network namespaces, veth "
                      "pairs, a bridge and tc qdiscs (CAP_NET_ADMIN); run baton as root, or "
                      "drop --link to run the local nodes on 127.0.0.1");
  for (const auto& name : remove_stale_emulated_hosts())
    spdlog::info("--link: removed {}, left by an earlier baton run that no longer exists", name);
  std::string error;
  auto hosts = emulated_hosts::create(count, link, error);
  if (!hosts)
    return make_error(errc::bad_config, error);
  spdlog::info("--link {}: {} emulated hosts in network namespaces {}..{}, links shaped with {}",
               link.text, count, hosts->namespace_of(0), hosts->namespace_of(hosts->size() - 1),
               hosts->shaping());
  return hosts;
}

} // namespace

caf::expected<void> local_cluster::start_node(const std::string& name, size_t index,
                                              const system_settings& settings,
                                              const std::string& workdir) {
  auto port_file = workdir + "/" + name + ".port";
  auto host = hosts_ ? hosts_->address_of(index) : std::string{"127.0.0.1"};
  std::vector<std::string> argv = hosts_ ? hosts_->launcher(index) : std::vector<std::string>{};
  argv.insert(argv.end(),
              {self_executable(), "node", "--name", name, "--host", host, "--port", "0",
               "--port-file", port_file, "--scheduler-threads",
               std::to_string(settings.scheduler_threads), "--heartbeat-ms",
               std::to_string(settings.heartbeat_interval.count()), "--connection-timeout-ms",
               std::to_string(settings.connection_timeout.count())});
  auto tls = tls_flags(settings.tls, name);
  if (!tls)
    return tls.error();
  argv.insert(argv.end(), tls->begin(), tls->end());
  // An emulated host's address is on this machine's private bridge: trusted
  // as 127.0.0.1 is (see the header).
  if (hosts_ && !settings.tls.enabled())
    argv.push_back("--insecure");
  // On this host, the tensors between the node processes (and this one) go
  // through shared memory; an emulated host's must cross its shaped link.
  if (!hosts_ && settings.shared_memory)
    argv.push_back("--shared-memory");
  auto child = child_process::start(argv, workdir + "/" + name + ".log");
  if (!child)
    return child.error();
  nodes_.push_back(std::move(*child));
  addresses_.push_back({name, host, 0, ""});
  return caf::unit;
}

caf::expected<local_cluster> local_cluster::start(int32_t count, const system_settings& settings,
                                                  const std::string& workdir,
                                                  const std::optional<link_spec>& link) {
  local_cluster cluster;
  if (link) {
    auto hosts = make_emulated_hosts(count, *link);
    if (!hosts)
      return hosts.error();
    cluster.hosts_ = std::move(*hosts);
  } else if (settings.shared_memory) {
    messages::use_shared_memory(true);
    cluster.shared_memory_ = {nullptr, [](void*) { messages::use_shared_memory(false); }};
  }
  for (int32_t i = 1; i <= count; ++i)
    if (auto started = cluster.start_node("n" + std::to_string(i), static_cast<size_t>(i - 1),
                                          settings, workdir);
        !started)
      return started.error();
  for (size_t i = 0; i < cluster.nodes_.size(); ++i) {
    auto& address = cluster.addresses_[i];
    auto port = await_port(cluster.nodes_[i], workdir + "/" + address.name + ".port", address.name);
    if (!port)
      return port.error();
    address.port = *port;
  }
  return cluster;
}

std::vector<pid_t> local_cluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& n : nodes_)
    out.push_back(n.pid());
  return out;
}

cluster local_cluster::place(cluster c) const {
  for (auto& n : c.nodes)
    for (const auto& a : addresses_)
      if (a.name == n.name) {
        n.host = a.host;
        n.port = a.port;
      }
  return c;
}

void local_cluster::stop() {
  for (auto& n : nodes_)
    n.stop();
  nodes_.clear();
  hosts_.reset();
}

caf::expected<std::string> make_work_directory(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string{base ? base : "/tmp"} + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    return make_error(errc::bad_file, "cannot create a directory like '" + pattern + "'");
  return pattern;
}

owned_directory::~owned_directory() {
  if (path_.empty() || kept_)
    return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

} // namespace runtime
} // namespace baton::actors

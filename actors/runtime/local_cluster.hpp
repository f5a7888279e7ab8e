#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/net/system.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/emulated_hosts.hpp"

namespace baton::actors {
inline namespace runtime {

/// N `baton node` processes on 127.0.0.1 with OS-chosen ports, started for
/// one run (`baton run --local-nodes N`) and always stopped when this object
/// goes away (also on errors and Ctrl-C). Node logs go to `workdir`. With a
/// link (`--link RATE[,DELAY]`) each node runs on an emulated host instead:
/// in its own network namespace behind a shaped link (emulated_hosts.hpp),
/// listening on its address there; the namespaces go with the nodes.
/// Without a link, every process of the run is on this host: with
/// `settings.shared_memory` the nodes and this process pass large tensors
/// through shared memory while the cluster lives (messages::use_shared_memory).
class local_cluster {
public:
  /// Starts nodes n1..nN and waits until each has written its port. With
  /// `settings.tls`, node nI uses DIR/nI.pem and DIR/nI.key from the
  /// directory DIR of the run's certificate, the run's CA, and serves only
  /// the run's certificate name (tls.allow); a missing file is an error
  /// (the nodes started so far are stopped).
  ///
  /// With `link`: needs root (an error with errc::bad_config otherwise);
  /// first removes what crashed earlier runs left (remove_stale_emulated_hosts),
  /// then builds the hosts, and logs how the links are shaped. Without TLS
  /// the nodes there serve without authentication (`baton node --insecure`),
  /// as nodes on 127.0.0.1 do: their addresses are on a bridge of this
  /// machine only.
  static caf::expected<local_cluster> start(int32_t count, const system_settings& settings,
                                            const std::string& workdir,
                                            const std::optional<link_spec>& link = std::nullopt);

  /// The nodes' addresses, in order n1..nN.
  const std::vector<node_address>& addresses() const { return addresses_; }

  /// The nodes' process ids, in order n1..nN.
  std::vector<pid_t> pids() const;

  /// `c` with the addresses of its nodes named n1..nN replaced by the
  /// running nodes' (with_local_nodes names them first).
  cluster place(cluster c) const;

  /// Stops every node (SIGTERM, then SIGKILL after a grace period), then
  /// removes the emulated hosts, if any.
  void stop();

private:
  /// Starts node `name` (n1..nN), on emulated host `index` if there are any.
  caf::expected<void> start_node(const std::string& name, size_t index,
                                 const system_settings& settings, const std::string& workdir);

  // Declared before nodes_: destroyed after them (processes first).
  std::unique_ptr<emulated_hosts> hosts_;
  std::vector<child_process> nodes_;
  std::vector<node_address> addresses_;
  /// Turns this process's shared memory off again when the last copy goes.
  std::shared_ptr<void> shared_memory_;
};

/// A fresh private directory under $TMPDIR (or /tmp) for logs and port files.
caf::expected<std::string> make_work_directory(const std::string& prefix);

/// A directory a run made for its own files (node logs, port files,
/// checkpoints nobody asked to keep): removed with everything in it when the
/// run is done with it, unless the run keeps it (a failed run keeps its logs,
/// and its checkpoints when they can be resumed, and says where they are).
class owned_directory {
public:
  /// Owns `path` (empty: nothing).
  explicit owned_directory(std::string path = {}) : path_(std::move(path)) {}
  owned_directory(const owned_directory&) = delete;
  owned_directory& operator=(const owned_directory&) = delete;
  ~owned_directory();

  const std::string& path() const { return path_; }

  /// Leaves the directory where it is.
  void keep() { kept_ = true; }

private:
  std::string path_;
  bool kept_ = false;
};

} // namespace runtime
} // namespace baton::actors

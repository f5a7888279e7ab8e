#include "apps/launch.hpp"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/config/names.hpp"
#include "actors/modes/registry.hpp"
#include "actors/modes/run.hpp"
#include "actors/runtime/launch_env.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/node.hpp"
#include "actors/runtime/rendezvous.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"

extern char** environ;

namespace baton::apps {

namespace {

using namespace baton::actors;

/// What `baton launch` was told.
struct launch_options {
  run_request run;              ///< the topology, --set, outputs, --resume
  launch_flags flags;           ///< --rank, --world-size, --master-addr, ...
  std::string host;             ///< --host: where this rank's node listens and is reached
  std::string name;             ///< --name: this rank's node name
  std::string tls_dir;          ///< --tls-dir: ca.pem, NAME.pem, NAME.key
  bool insecure = false;        ///< --insecure: a node without TLS beyond loopback
  int32_t rendezvous_timeout = 300; ///< --rendezvous-timeout, seconds
};

bool parse_launch_flag(args& a, const std::string& flag, launch_options& o) {
  std::string v;
  int32_t n = 0;
  uint16_t port = 0;
  auto& r = o.run;
  if (flag == "--set")
    return a.value(flag, v) && (r.overrides.push_back(v), true);
  if (flag == "--metrics-out")
    return a.value(flag, r.metrics_out);
  if (flag == "--save-model")
    return a.value(flag, r.save_model);
  if (flag == "--resume")
    return a.value(flag, r.resume_dir);
  // The hosts a launch takes (actors::max_launch_hosts): the range the
  // environment's variables are checked against too.
  constexpr auto most = static_cast<int32_t>(actors::max_launch_hosts);
  if (flag == "--rank")
    return a.value(flag, v) && parse_in_range(flag, v, 0, most - 1, n) && (o.flags.rank = n, true);
  if (flag == "--world-size")
    return a.value(flag, v) && parse_in_range(flag, v, 1, most, n) &&
           (o.flags.world_size = n, true);
  if (flag == "--master-addr")
    return a.value(flag, o.flags.master_addr);
  if (flag == "--rendezvous-port")
    return a.value(flag, v) && parse_port(flag, v, port) && (o.flags.rendezvous_port = port, true);
  if (flag == "--rendezvous-timeout")
    return a.value(flag, v) && parse_in_range(flag, v, 1, 86400, o.rendezvous_timeout);
  if (flag == "--hostfile")
    return a.value(flag, o.flags.hostfile);
  if (flag == "--job-id")
    return a.value(flag, o.flags.job_id);
  if (flag == "--host")
    return a.value(flag, o.host);
  if (flag == "--name")
    return a.value(flag, o.name);
  if (flag == "--tls-dir")
    return a.value(flag, o.tls_dir);
  if (flag == "--insecure")
    return o.insecure = true;
  if (!flag.empty() && flag[0] != '-' && r.topology_path.empty())
    return r.topology_path = flag, true;
  return false;
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {0};
  return ::gethostname(name, sizeof name) == 0 ? std::string{name} : std::string{"localhost"};
}

/// `text` as a YAML single-quoted scalar, for a --set value.
std::string yaml_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string{"''"} : std::string(1, c);
  return out + "'";
}

/// This rank's node name: --name; the topology's node of this rank when it
/// lists one per rank; with TLS the host's name (its certificate's); else nRANK.
std::string node_name(const launch_options& o, const topology& t, const launch_identity& id) {
  if (!o.name.empty())
    return o.name;
  if (t.nodes.size() == static_cast<size_t>(id.world_size))
    return t.nodes[static_cast<size_t>(id.rank)].name;
  if (!o.tls_dir.empty())
    return hostname();
  return "n" + std::to_string(id.rank);
}

/// The files of --tls-dir for the node `name`.
tls_settings tls_files(const std::string& dir, const std::string& name) {
  if (dir.empty())
    return {};
  return {dir + "/" + name + ".pem", dir + "/" + name + ".key", dir + "/ca.pem"};
}

/// The `nodes:` of the job: every rank's node, in rank order.
std::string nodes_override(const std::vector<launch_peer>& nodes) {
  std::string out = "nodes=[";
  for (const auto& n : nodes)
    out += (n.rank == 0 ? "" : ", ") + std::string{"{name: "} + n.name + ", host: " +
           yaml_quoted(n.host) + ", port: " + std::to_string(n.port) + "}";
  return out + "]";
}

caf::error check_unique_names(const std::vector<launch_peer>& nodes) {
  std::map<std::string, int32_t> seen;
  for (const auto& n : nodes) {
    auto [it, fresh] = seen.emplace(name_key(n.name), n.rank);
    if (!fresh)
      return make_error(errc::bad_config,
                        "ranks " + std::to_string(it->second) + " and " + std::to_string(n.rank) +
                          " both name their node '" + n.name + "' (with --tls-dir a node is "
                          "named after its host: run one rank per host, give --name, or list "
                          "one node per rank in the topology's nodes:)");
  }
  return caf::none;
}

/// What the models are built for, given to the run over the ranks' nodes,
/// where the job does not read the data's files (docs/data.md#on-a-cluster):
/// rank 0 has read their headers when it loaded the topology (one that
/// lists no nodes; topology::data_header), so the data section gets the
/// shape and classes they say where it does not say them. A topology that
/// lists its nodes says them itself (its load asks for them).
caf::error declare_data(run_request& r, const topology& t) {
  const auto& d = t.data;
  const bool fixed = d.kind == "fashion-mnist" || d.kind == "cifar10" || d.kind == "cifar100";
  const bool need_classes = d.classes <= 0 && (d.kind == "npy" || d.kind == "image-folder");
  if (!t.embedded() || d.synthetic() || fixed || (!d.shape.empty() && !need_classes))
    return caf::none;
  if (!t.data_header)
    return make_error(errc::bad_config, t.file + ": rank 0 has not read the dataset's headers: "
                                                 "give data.shape and data.classes "
                                                 "(docs/data.md#on-a-cluster)");
  const model::data_header& h = *t.data_header;
  if (d.shape.empty() && h.shape.size() == 3)
    r.overrides.push_back("data.shape=[" + std::to_string(h.shape[0]) + ", " +
                          std::to_string(h.shape[1]) + ", " + std::to_string(h.shape[2]) + "]");
  if (need_classes)
    r.overrides.push_back("data.classes=" + std::to_string(h.classes));
  if (h.shape.size() == 3)
    spdlog::info("baton launch: the dataset's headers, read on rank 0: samples {}x{}x{}, {} "
                 "classes", h.shape[0], h.shape[1], h.shape[2], h.classes);
  return caf::none;
}

/// A run that checkpoints into runtime.checkpoint_dir and did not finish
/// there is resumed: what a launcher's restart needs. A resumed run writes
/// the outputs its first command asked for, as `baton run --resume` does.
caf::error resume_unfinished(run_request& r, const topology& t) {
  if (r.resume_dir.empty() && !t.runtime.checkpoint_dir.empty()) {
    auto record = read_run_record(t.runtime.checkpoint_dir);
    if (record && record->finished_step < 0) {
      spdlog::info("baton launch: {} holds the checkpoints of run {}, which did not finish: "
                   "resuming it", t.runtime.checkpoint_dir, record->run_id);
      r.resume_dir = t.runtime.checkpoint_dir;
    }
  }
  return with_recorded_outputs(r);
}

/// How long a rank's node may take to stop once the rank's part is over.
constexpr auto node_stop_grace = std::chrono::seconds(10);

/// This rank's node, run on a thread of its own until `stop_`.
class node_thread {
public:
  /// Starts the node; port() says where it listens.
  explicit node_thread(node_settings s) {
    // The node says where it listens, or ends without a word when it cannot
    // start (it logs why): a slot and a flag, never a promise that would be
    // broken (std::future_error, an abort) by a node that did not listen.
    s.listening = [this](uint16_t port) {
      std::lock_guard<std::mutex> lock{mutex_};
      port_ = port;
      changed_.notify_all();
    };
    thread_ = std::thread{[this, s] {
      int code = run_node(s, stop_, all_roles());
      std::lock_guard<std::mutex> lock{mutex_};
      exit_code_ = code;
      ended_ = true;
      changed_.notify_all();
    }};
  }
  ~node_thread() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

  /// Stops the node once this rank's part is over. A node that has not
  /// stopped within `grace` (its actor system waiting for an actor that
  /// never goes) would keep the rank's process, and so the launcher's job,
  /// alive with its work done: the process then ends with `code` without it.
  void stop_within(std::chrono::seconds grace, int code) {
    stop_ = true;
    std::unique_lock<std::mutex> lock{mutex_};
    if (changed_.wait_for(lock, grace, [this] { return ended_; })) {
      lock.unlock();
      thread_.join();
      return;
    }
    spdlog::warn("baton launch: node still stopping {} s after the end: exiting with {}",
                 grace.count(), code);
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }

  /// The node's port once it listens, or nothing when it could not start
  /// (exit_code() says how it ended).
  std::optional<uint16_t> port() {
    std::unique_lock<std::mutex> lock{mutex_};
    changed_.wait(lock, [this] { return port_.has_value() || ended_; });
    return port_;
  }

  /// The node's exit code once it has ended.
  int exit_code() {
    std::lock_guard<std::mutex> lock{mutex_};
    return exit_code_;
  }

private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  bool ended_ = false;              ///< guarded by mutex_
  int exit_code_ = 0;               ///< guarded by mutex_
  std::optional<uint16_t> port_;    ///< guarded by mutex_
  std::thread thread_;
};


/// How long the job may take to stop once a rank is lost. A job that is
/// restarting its actors may wait on a request to the lost rank's node for
/// the request's whole timeout; the launcher needs this process gone sooner.
constexpr auto lost_rank_grace = std::chrono::seconds(2);

/// Ends the process with exit code 1 after a lost rank, telling the others
/// first: the job's thread is still blocked and cannot be joined.
[[noreturn]] void abandon_job(rendezvous_host& ranks) {
  spdlog::error("baton launch: the job did not stop within {} s of the loss: ending the process",
                lost_rank_grace.count());
  ranks.finish(1);
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(1);
}

/// Runs the job over `nodes` while watching the other ranks: one that is
/// lost stops the job, and the run ends with exit code 1 (the launcher
/// restarts the whole job; with checkpoints it resumes).
int run_over(run_request r, rendezvous_host& ranks, const std::vector<launch_peer>& nodes,
             const std::atomic<bool>& interrupted) {
  r.overrides.push_back(nodes_override(nodes));
  std::atomic<bool> stop{false};
  r.interrupted = &stop;
  auto job = std::async(std::launch::async, [r] { return run_job(r); });
  std::optional<int32_t> lost;
  while (!stop && job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    lost = ranks.lost(std::chrono::milliseconds(100));
    stop = interrupted.load() || lost.has_value();
  }
  if (!lost)
    return report_run(job.get());
  spdlog::error("baton launch: lost rank {} (its process ended): the job is stopped so that "
                "the launcher can restart it (with runtime.checkpoint_every and "
                "runtime.checkpoint_dir a restart resumes from the checkpoints)", *lost);
  if (job.wait_for(lost_rank_grace) != std::future_status::ready)
    abandon_job(ranks);
  return 1;
}

/// What the rendezvous of this rank checks and proves: the job id, and with
/// --tls-dir the certificates of the node `name`.
rendezvous_rules rules_of(const launch_options& o, const launch_identity& id,
                          const std::string& name) {
  rendezvous_rules rules;
  rules.job_id = id.job_id;
  if (!o.tls_dir.empty()) {
    auto tls = tls_files(o.tls_dir, name);
    rules.certificate = tls.certificate;
    rules.key = tls.key;
    rules.ca = tls.ca;
  }
  return rules;
}

/// Rank 0 gives up before the job ran: logs `err`, tells the registered
/// ranks why (they end at once, with the same code), returns the code.
int give_up(rendezvous_host& ranks, const caf::error& err) {
  int code = fail(err);
  ranks.finish(code, "rank 0 gave up: " + context_of(err));
  return code;
}

/// Rank 0: gathers the ranks' nodes, runs the job over them, tells every
/// rank its exit code.
int lead(launch_options o, const launch_identity& id, const topology& t, launch_peer self,
         bool loopback, const std::atomic<bool>& interrupted) {
  auto ranks = rendezvous_host::listen(id.rendezvous_port, loopback, rules_of(o, id, self.name));
  if (!ranks)
    return fail(ranks.error());
  spdlog::info("baton launch: rank 0 waits for the other {} rank(s) on port {}{}",
               id.world_size - 1, id.rendezvous_port,
               o.tls_dir.empty() ? "" : " (each proves its node's certificate)");
  auto peers = (*ranks)->gather(id.world_size, std::chrono::seconds(o.rendezvous_timeout),
                                interrupted);
  if (!peers)
    return give_up(**ranks, peers.error());
  if (self.host.empty())
    self.host = (*ranks)->own_address().empty() ? "127.0.0.1" : (*ranks)->own_address();
  peers->insert(peers->begin(), self);
  if (auto err = check_unique_names(*peers))
    return give_up(**ranks, err);
  if (auto err = declare_data(o.run, t))
    return give_up(**ranks, err);
  if (auto err = resume_unfinished(o.run, t))
    return give_up(**ranks, err);
  int code = run_over(o.run, **ranks, *peers, interrupted);
  (*ranks)->finish(code);
  return code;
}

/// Every other rank: registers its node and waits for rank 0's exit code.
int follow(const launch_options& o, const launch_identity& id, const launch_peer& self,
           const std::atomic<bool>& interrupted) {
  auto joined = rendezvous_guest::join(id.master_addr, id.rendezvous_port, self, id.world_size,
                                       std::chrono::seconds(o.rendezvous_timeout), interrupted,
                                       rules_of(o, id, self.name));
  if (!joined)
    return fail(joined.error());
  auto end = (*joined)->wait(interrupted);
  if (!end && end.error() == errc::node_unreachable) {
    spdlog::error("baton launch: {}", context_of(end.error()));
    return 1;
  }
  if (!end)
    return fail(end.error());
  if (!end->reason.empty())
    spdlog::error("baton launch: {}", end->reason);
  else if (end->code != 0)
    spdlog::error("baton launch: rank 0 ended the job with exit code {} (its log says why)",
                  end->code);
  return end->code;
}

/// The node settings of this rank.
node_settings node_of(const launch_options& o, const std::string& name, bool loopback) {
  node_settings s;
  s.name = name;
  s.host = !o.host.empty() ? o.host : loopback ? "127.0.0.1" : "0.0.0.0";
  s.insecure = o.insecure;
  s.system.tls = tls_files(o.tls_dir, name);
  return s;
}

/// Starts this rank's node and plays its part; the exit code. `loopback`:
/// rank 0's host resolves to loopback addresses only (look_up).
int launch(launch_options o, const launch_identity& id, const topology& t, bool loopback,
           const std::atomic<bool>& interrupted) {
  auto name = node_name(o, t, id);
  if (!o.tls_dir.empty()) {
    auto tls = tls_files(o.tls_dir, name);
    o.run.overrides.push_back("runtime.tls.certificate=" + yaml_quoted(tls.certificate));
    o.run.overrides.push_back("runtime.tls.key=" + yaml_quoted(tls.key));
    o.run.overrides.push_back("runtime.tls.ca=" + yaml_quoted(tls.ca));
  } else if (t.runtime.tls.enabled()) {
    return fail(make_error(errc::bad_config, t.file + ": runtime.tls is for `baton run`; every "
                                             "rank of `baton launch` needs its own certificate: "
                                             "give --tls-dir DIR (DIR/ca.pem, DIR/NAME.pem, "
                                             "DIR/NAME.key, see docs/running-on-a-cluster.md)"));
  }
  node_thread node{node_of(o, name, loopback)};
  auto port = node.port();
  if (!port)
    return node.exit_code();
  bool listed = !o.host.empty() && o.host != "0.0.0.0";
  launch_peer self{id.rank, name, listed ? o.host : loopback ? "127.0.0.1" : "", *port};
  int code = id.rank == 0 ? lead(o, id, t, self, loopback, interrupted)
                          : follow(o, id, self, interrupted);
  node.stop_within(node_stop_grace, code);
  return code;
}

} // namespace

std::map<std::string, std::string> environment_variables() {
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry{*e};
    auto eq = entry.find('=');
    if (eq != std::string::npos)
      out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

int report_run(caf::expected<job_result> run) {
  if (!run)
    return fail(run.error());
  const job_result& result = *run;
  if (!result.failed.empty()) {
    spdlog::error("the run failed, its work so far is in the outputs above: {}", result.failed);
    return 2;
  }
  // Issue 32 item 11: NaN weights are a failed run, not exit 0.
  if (auto rows = actors::non_finite_losses(result); !rows.empty()) {
    spdlog::error("the training loss is not finite for {}, so its weights are not finite "
                  "either: the run failed (the warnings above name where the first NaN or inf "
                  "came from and what the strategy can change)",
                  rows);
    return 1;
  }
  return 0;
}

int cmd_launch(args& a, const std::atomic<bool>& interrupted) {
  launch_options o;
  o.run.progress_tty = ::isatty(STDERR_FILENO) != 0;
  if (!read_flags(a, "baton launch", [&](const std::string& f) { return parse_launch_flag(a, f, o); }))
    return 2;
  if (o.run.topology_path.empty()) {
    std::fprintf(stderr, "baton launch: expected TOPOLOGY.yaml (see baton help)\n");
    return 2;
  }
  std::vector<hostfile_entry> hosts;
  if (!o.flags.hostfile.empty()) {
    auto loaded = load_hostfile(o.flags.hostfile);
    if (!loaded)
      return fail(loaded.error());
    hosts = *loaded;
  }
  auto id = resolve_launch(o.flags, environment_variables(), hosts, hostname());
  if (!id)
    return fail(id.error());
  spdlog::info("baton launch: {}", id->origin);
  const auto master = look_up(id->master_addr);
  if (!master.unknown.empty())
    return fail(make_error(errc::bad_config, "rank 0's host '" + id->master_addr + "': " +
                                               master.unknown +
                                               " (where it came from is in the line above)"));
  // Every rank reads the topology: a host without the file (or with another
  // one) fails here, and the node names come from it.
  auto t = load_request_topology(o.run);
  if (!t)
    return fail(t.error());
  o.run.topology_text = t->text; // rank 0's job: the file as read here, not read again
  return launch(o, *id, *t, master.loopback, interrupted);
}

} // namespace baton::apps

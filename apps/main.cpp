// The `baton` command: parses arguments, builds a request and hands it to the
// libraries. No logic of its own.

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/modes/registry.hpp"
#include "actors/modes/run.hpp"
#include "actors/net/certs.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/launch_env.hpp"
#include "actors/runtime/node.hpp"
#include "apps/args.hpp"
#include "apps/bench/bench.hpp"
#include "apps/compare/compare.hpp"
#include "apps/predict/predict.hpp"
#include "apps/report/report.hpp"
#include "apps/version.hpp"
#include "apps/launch.hpp"
#include "apps/zygote.hpp"
#include "messages/errc.hpp"

extern char** environ;

namespace {

using namespace baton;
using namespace baton::apps;

std::atomic<bool> interrupted{false};

/// How long a stop asked for by SIGINT or SIGTERM may take (actors stopped,
/// node processes ended, outputs written) before baton exits regardless.
constexpr auto stop_grace = std::chrono::seconds(15);

/// The first SIGINT or SIGTERM asks the running command to stop cleanly;
/// a second one exits at once.
void on_signal(int) {
  if (interrupted.exchange(true)) {
    const char text[] = "\nbaton: second signal: exiting now\n";
    auto ignored = ::write(STDERR_FILENO, text, sizeof text - 1);
    (void)ignored;
    ::_exit(130);
  }
}

/// A reader of standard output or error that went away (`baton bench ... |
/// head`) stops the command as SIGINT does, so that its node processes and
/// temporary files go with it; what it prints from then on goes to
/// /dev/null. A SIGPIPE of another descriptor (a socket, a child's pipe) is
/// left to the write that raised it, which fails with EPIPE.
void on_broken_pipe(int) {
  bool gone = false;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) != 1 || (p.revents & POLLERR) == 0)
      continue; // a pipe's writing end polls POLLERR once its reader is gone
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, fd);
      ::close(null);
    }
    gone = true;
  }
  if (gone)
    interrupted.store(true);
}

/// Makes a signal always end the process: a command busy where it cannot
/// look at `interrupted` (a thread that cannot be created, CAF waiting for
/// an actor) exits `stop_grace` after the signal.
void start_stop_watchdog() {
  std::thread{[] {
    while (!interrupted.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(stop_grace);
    std::fprintf(stderr, "baton: still stopping %lld s after the signal: exiting now\n",
                 static_cast<long long>(stop_grace.count()));
    std::fflush(stderr);
    ::_exit(130);
  }}.detach();
}

constexpr const char* usage = R"(baton: actor-based distributed training runtime

usage:
  baton run [TOPOLOGY.yaml] [options]   run a job (default: built-in configs/transfer.yaml,
                                        all actors in this process)
      --set KEY=VALUE        override a topology key (repeatable), e.g. --set data.epochs=2
      --local-nodes N        start N `baton node` processes on 127.0.0.1 and run over them
      --link RATE[,DELAY]    with --local-nodes: each node on an emulated host (its own
                             network namespace, a veth link to a bridge, shaped with tc
                             tbf, and netem delay where the kernel has it), e.g. 1gbit,1ms
                             or 100mbit; needs root (see docs/clusters-and-links.md)
      --baseline separate    train every head in its own process with its own backbone
      --mode local           one process, no actors (the reference loop)
      --only-head NAME       with --mode local: train only this head
      --threads N            with --mode local: torch threads (default: the actors' budget,
                             runtime.compute_threads, so that its sums are theirs bit for
                             bit; job: transfer, all cores); data-parallel computes
                             min(N, W) workers at once on N / that threads each
      --metrics-out FILE     write the metrics JSON to FILE
      --curves FILE.csv      write the learning curves as CSV: a row per epoch per result
                             (head, stage, workers) and a row per actor with its totals;
                             columns in docs/outputs.md#curves
      --trace FILE           job: pipeline: write every stage's schedule (forward, backward,
                             step, send with microbatch ids and weight versions) as a
                             Chrome / Perfetto trace (open in ui.perfetto.dev)
      --save-model FILE      save the trained model as a TorchScript module (every
                             strategy; torch.jit.load reads it; docs/exporting.md)
      --fault K=V,...        inject a fault (repeatable; see docs/faults-and-recovery.md):
                             kind=throw,actor=stage1,at_step=9 | kind=kill_node,node=n2,
                             at_step=6 | kind=stop_node,node=n2,after_ms=3000,stopped_ms=4000
      --resume DIR           continue a killed or failed run from its checkpoints in DIR
                             (DIR/run.yaml has its topology and --set); a run that finished
                             or that another live run holds is refused
      --tls-cert F --tls-key F --tls-ca F
                             mutual TLS to the nodes with this certificate, key and CA
                             (same as runtime.tls); with --local-nodes, node nI uses
                             nI.pem / nI.key from the certificate's directory
  baton pretrain [TOPOLOGY.yaml] [--set KEY=VALUE]...
                                        (re)make the backbone checkpoint of the topology
  baton node [--config node.yaml] [--name N] [--host H] [--port P] [--port-file F]
             [--scheduler-threads T] [--heartbeat-ms MS] [--connection-timeout-ms MS]
             [--tls-cert F --tls-key F --tls-ca F] [--tls-allow NAME]... [--insecure]
             [--shared-memory]
                                        serve actors for a coordinator (port 0: any); with
                                        TLS only to coordinators whose certificate has a
                                        --tls-allow name (node.yaml: tls, data_dirs,
                                        checkpoint_dir; see docs/security.md); without TLS
                                        only on loopback (default 127.0.0.1) unless
                                        --insecure; --shared-memory: every process of its
                                        jobs is on this host, large tensors go through
                                        /dev/shm
  baton launch TOPOLOGY.yaml [--set KEY=VALUE]... [--metrics-out F] [--save-model F]
               [--rank R --world-size W --master-addr HOST] [--rendezvous-port P]
               [--hostfile FILE] [--host H] [--name N] [--tls-dir DIR] [--insecure]
               [--rendezvous-timeout S] [--job-id ID]
                                        run once per host by a launcher (torchrun, srun,
                                        PyTorchJob, mpirun): every rank runs a node, rank 0
                                        the job over them; who is who from the flags, else
                                        RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, else
                                        OMPI_COMM_WORLD_RANK/SIZE, else SLURM_PROCID/
                                        SLURM_NTASKS/SLURM_JOB_NODELIST, else --hostfile
                                        (see docs/running-on-a-cluster.md); the job id
                                        (--job-id, TORCHELASTIC_RUN_ID, SLURM_JOB_ID) keeps
                                        two jobs on one port apart; with --tls-dir each rank
                                        proves its certificate at the rendezvous
  baton certs init DIR [--force]        make the cluster CA: DIR/ca.pem and DIR/ca.key
  baton certs issue NAME --dir DIR [--force] [--days D]
                                        make DIR/NAME.pem and DIR/NAME.key (CN and DNS name
                                        NAME) signed by the CA in DIR, valid D days (1 to
                                        3650: the CA's 10 years; default 825)
  baton bench transfer [--heads K] [--quick] [--json FILE] [--backbone convnet|convnet_wide]
                       [--local-nodes N [--link RATE[,DELAY]]] [--set KEY=VALUE]...
                                        shared backbone vs separate baseline, side by side,
                                        and the shared side split for the cores (split: auto,
                                        a stage per core; not with --local-nodes, which puts
                                        the shared side on N node processes)
  baton bench pipeline [--quick] [--json FILE] [--model convnet|resnet18]
                       [--schedule gpipe|1f1b-flush|1f1b|1f1b-dynamic] [--repeat N]
                       [--link RATE[,DELAY] | --embedded] [--microbatches 2|4|8]
                                        (a) local loop, one compute thread, vs (b) a 2-stage
                                        pipeline on 2 node processes (--embedded: in one
                                        process), one thread each, per
                                        schedule: samples/s, ratio, utilisation, bubble,
                                        overhead; --repeat: N interleaved runs per side,
                                        the median shown (default 1); minibatches of 128
                                        in --microbatches microbatches (default 4)
                                        (every bench: --link puts the node processes it
                                        starts on emulated hosts, as `baton run --link`)
  baton bench data-parallel [--quick] [--json FILE] [--model mlp|convnet|resnet18]
                       [--workers W] [--batch B] [--shards S] [--sync-every L]
                       [--side local-threads|ring|ring-serial|embedded|ps|local-sgd|ps-stale]...
                       [--repeat N] [--link RATE[,DELAY]] [--set KEY=VALUE]...
                                        (a) local loop, one compute thread, global batch
                                        W x B (default 2 x 64), and with W threads
                                        (local-threads), vs W workers on W node
                                        processes, one thread each: ring, ring without
                                        overlap (ring-serial), the ring's W workers in
                                        this process (embedded), ps, local SGD,
                                        ps with bounded staleness (--side: only those):
                                        samples/s, ratio, efficiency, time split per step,
                                        overlap, bytes per step next to the theory;
                                        --repeat: N interleaved rounds, the median shown
  baton bench freezing [--quick] [--json FILE] [--epochs E] [--batch B] [--link RATE[,DELAY]]
                                        a convnet pretrained on groups4 fine-tuned on all10
                                        by 2 workers on 2 node processes: fully, frozen after
                                        each group, frozen + cached, adaptive (+ cache):
                                        samples/s, speedup, time split, bytes, accuracy
  baton bench ist [--quick] [--workers W] [--link RATE[,DELAY]] [--target ACC] [--epochs E]
                  [--json FILE]
                                        IST's network, 2 and 3 layers ([4096], [4096, 4096];
                                        quick: [512], [512, 512], 16384 samples, 5 epochs),
                                        W workers (default 2) on W node processes: (a) IST,
                                        (b) local SGD with IST's L, (c) the ring every step:
                                        time to ACC (default 0.85) over E epochs (default 10),
                                        accuracy curve, bytes per round, speedups of (a)
  baton bench faults [--quick] [--json FILE] [--kill-at STEP] [--link RATE[,DELAY]]
                                        a gpipe pipeline on 3 local nodes, fault-free and
                                        with the node of stage 0 SIGKILLed at STEP (default:
                                        half way): wall times, detection and recovery
                                        times, whether the weights match
  baton profile TOPOLOGY.yaml --out profile.json [--microbatches N] [--batch B]
                                        time every layer of the topology's model inside a
                                        training pass (forward, backward, optimiser step,
                                        activation and parameter bytes), one thread, the
                                        median over N microbatches (default 10) of B samples
                                        (default: data.batch_size / data.microbatches)
  baton plan --profile profile.json --machines N [--bandwidth B] [--memory M] [--straight]
             [--weight-gradient here|next] [--out topology.yaml [--topology TOPOLOGY.yaml]]
                                        PipeDream's partitioner: stages and replicas ("2-1-1")
                                        for at most N (1-1024) machines, B between them: a rate as
                                        --link takes it (1gbit, 100mbit) or bytes/s (default
                                        1e9 = 8gbit), M bytes per machine (default unlimited);
                                        --straight: no replication; --weight-gradient next: a
                                        cut after a convolution hands its weight gradient to the
                                        next stage where that lowers the slowest stage (here:
                                        the plan only says what it would move); --out: the
                                        topology with job: pipeline and the planned stages
  baton compare WORKLOAD.yaml [--strategies LIST] [--local-nodes N] [--link RATE[,DELAY]]
                [--target ACC] [--budget SECONDS] [--repeat N] [--out DIR]
                [--set KEY=VALUE]... [--predict HOSTS,...] [--bandwidth B] [--latency L]
                                        run every strategy that applies to the workload (or
                                        LIST) N times, interleaved, over the same nodes and
                                        links, each to ACC or its budget: the recommendation,
                                        a table ranked by median time to target with the
                                        min-max of the runs, DIR/report.json and report.html
                                        (N: 3, or 1 when 3 rounds overrun the budget; default
                                        DIR: compare-out; see docs/comparing.md)
  baton predict WORKLOAD.yaml [--strategies LIST] [--hosts 4,8,...] [--bandwidth 1gbit,...]
                [--latency SECONDS] [--link RATE[,DELAY]] [--profile FILE] [--json FILE]
                [--out DIR] [--set KEY=VALUE]...
                                        each strategy's step time and samples/s predicted by
                                        the cost model (no training run) from the workload's
                                        profile, a link model measured once per link (or
                                        --latency) and the runtime's own cost per message
                                        measured once per machine (kept in DIR with the
                                        links), each step simulated from the strategy's
                                        plan on that many hosts (the formula beside it): a
                                        table per bandwidth, strategies x hosts, and the
                                        crossovers (see docs/cost-model.md)
  baton report FILE... [--out DIR] [--target ACC]
                                        the report of `baton compare` from existing files:
                                        metrics JSON (`baton run --metrics-out`), a
                                        report.json, a bench's --json with "runs"; writes
                                        DIR/report.json and DIR/report.html (plots drawn by
                                        gnuplot; default DIR: report); ACC: the accuracy
                                        the time to target is measured to
  baton help [COMMAND]                  this text, or one command's part of it (also
                                        `baton COMMAND --help`)
  baton --version                       the version: the project's, and `git describe` of
                                        the tree it was built from

exit codes: 0 success, 1 run failed, 2 bad input (config, file, node) or a file that
cannot be written (full disk, read-only directory), 130 interrupted (SIGINT, SIGTERM,
or the reader of its output gone, as `| head` goes)
)";

/// The part of `usage` about `command` ("compare", "bench"): the lines from
/// each entry that starts `  baton COMMAND` to the next entry, under the
/// same heading and above the exit codes; the whole text when no entry has it.
std::string usage_of(const std::string& command) {
  const std::string text = usage;
  const std::string entry = "  baton " + command;
  std::string part;
  bool inside = false;
  for (size_t at = 0, end = 0; at < text.size(); at = end + 1) {
    end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.rfind("  baton ", 0) == 0)
      inside = line.rfind(entry, 0) == 0 &&
               (line.size() == entry.size() || line[entry.size()] == ' ');
    else if (line.empty())
      inside = false;
    if (inside)
      part += line + "\n";
  }
  if (part.empty())
    return text;
  const auto codes = text.find("exit codes:");
  return "usage:\n" + part + "\n" + text.substr(codes);
}

/// `--tls-cert F` on `baton run` is `--set runtime.tls.certificate=F`: one
/// path into the topology, checked where runtime.tls is. The value is a YAML
/// single-quoted string, so that any path stays a string.
std::string tls_override(const std::string& flag, const std::string& path) {
  std::string key = flag == "--tls-cert" ? "certificate" : flag == "--tls-key" ? "key" : "ca";
  std::string quoted;
  for (char c : path)
    quoted += c == '\'' ? std::string{"''"} : std::string(1, c);
  return "runtime.tls." + key + "='" + quoted + "'";
}

bool parse_run_flag(args& a, const std::string& flag, actors::run_request& r) {
  std::string v;
  if (flag == "--set")
    return a.value(flag, v) && (r.overrides.push_back(v), true);
  if (flag == "--local-nodes")
    return a.value(flag, v) && parse_int(flag, v, r.local_nodes);
  if (flag == "--link")
    return a.value(flag, v) && parse_link(flag, v, r.link);
  if (flag == "--baseline")
    return a.value(flag, r.baseline);
  if (flag == "--mode")
    return a.value(flag, r.mode);
  if (flag == "--only-head")
    return a.value(flag, r.only_head);
  if (flag == "--threads")
    return a.value(flag, v) && parse_in_range(flag, v, 0, actors::max_compute_threads, r.threads);
  if (flag == "--metrics-out")
    return a.value(flag, r.metrics_out);
  if (flag == "--trace")
    return a.value(flag, r.trace_out);
  if (flag == "--save-model")
    return a.value(flag, r.save_model);
  if (flag == "--resume")
    return a.value(flag, r.resume_dir);
  if (flag == "--curves")
    return a.value(flag, r.curves);
  if (flag == "--fault") {
    if (!a.value(flag, v))
      return false;
    auto entry = actors::fault_override(v);
    if (!entry) {
      std::fprintf(stderr, "baton run: %s\n", describe(entry.error()).c_str());
      return false;
    }
    r.overrides.push_back(*entry);
    return true;
  }
  if (flag == "--tls-cert" || flag == "--tls-key" || flag == "--tls-ca")
    return a.value(flag, v) && (r.overrides.push_back(tls_override(flag, v)), true);
  if (!flag.empty() && flag[0] != '-' && r.topology_path.empty()) {
    r.topology_path = flag;
    return true;
  }
  std::fprintf(stderr, "baton run: unknown argument '%s'%s (see baton help)\n", flag.c_str(),
               flag_hint(flag).c_str());
  return false;
}

/// `baton run` started as one of several copies by a launcher (torchrun,
/// mpirun, srun) would train the whole job in every copy, all writing the
/// same outputs: refused, pointing to `baton launch`. The message, or "".
std::string refuse_launched_copies(const char* command) {
  auto copies = actors::launched_copies(environment_variables());
  if (copies.empty())
    return {};
  return std::string{command} + ": " + copies + " says that a launcher (torchrun, mpirun, "
         "srun) started this process as one of several copies, and each copy would run the "
         "whole job, all writing the same outputs: run `baton launch TOPOLOGY.yaml` under the "
         "launcher instead (one node per process, rank 0 runs the job over them; see "
         "docs/running-on-a-cluster.md), or unset the variable to run one job here";
}

int cmd_run(args& a, bool pretrain_only) {
  if (auto refusal = refuse_launched_copies(pretrain_only ? "baton pretrain" : "baton run");
      !refusal.empty()) {
    std::fprintf(stderr, "%s\n", refusal.c_str());
    return 2;
  }
  actors::run_request r;
  r.interrupted = &interrupted;
  r.progress_tty = ::isatty(STDERR_FILENO) != 0;
  while (!a.done()) {
    auto flag = a.take();
    // `baton pretrain` takes the topology and --set: baton run's other flags
    // were accepted and ignored.
    if (pretrain_only && flag != "--set" && !flag.empty() && flag[0] == '-') {
      std::fprintf(stderr, "baton pretrain: %s is not one of its options (it takes "
                           "[TOPOLOGY.yaml] and --set KEY=VALUE; see baton help)\n",
                   flag.c_str());
      return 2;
    }
    if (!parse_run_flag(a, flag, r))
      return 2;
  }
  if (!r.link.empty() && (r.local_nodes < 1 || r.mode == "local" || !r.baseline.empty())) {
    std::fprintf(stderr, "baton run: --link needs --local-nodes N (it shapes the links of the "
                         "local node processes), without --mode local or --baseline\n");
    return 2;
  }
  if (pretrain_only) {
    auto err = actors::pretrain(r);
    return err ? fail(err) : 0;
  }
  // A resumed run writes the outputs its first command asked for.
  if (auto err = actors::with_recorded_outputs(r))
    return fail(err);
  return report_run(actors::run_job(r));
}

int cmd_node(args& a) {
  actors::node_settings s;
  std::string v;
  while (!a.done()) {
    auto flag = a.take();
    int32_t n = 0;
    bool ok = true;
    if (flag == "--config") {
      ok = a.value(flag, v);
      auto loaded = ok ? actors::load_node_settings(v) : caf::expected<actors::node_settings>{s};
      if (!loaded)
        return fail(loaded.error());
      s = *loaded;
    } else if (flag == "--name") {
      ok = a.value(flag, s.name);
    } else if (flag == "--host") {
      ok = a.value(flag, s.host);
    } else if (flag == "--port") {
      ok = a.value(flag, v) && parse_port(flag, v, s.port);
    } else if (flag == "--port-file") {
      ok = a.value(flag, s.port_file);
    } else if (flag == "--scheduler-threads") {
      ok = a.value(flag, v) && parse_in_range(flag, v, 1, actors::max_scheduler_threads,
                                              s.system.scheduler_threads);
    } else if (flag == "--heartbeat-ms") {
      ok = a.value(flag, v) && parse_int(flag, v, n);
      s.system.heartbeat_interval = std::chrono::milliseconds{n};
    } else if (flag == "--connection-timeout-ms") { // 0: the runtime's default (local nodes)
      ok = a.value(flag, v) && parse_int(flag, v, n);
      s.system.connection_timeout = std::chrono::milliseconds{n};
    } else if (flag == "--tls-cert") {
      ok = a.value(flag, s.system.tls.certificate);
    } else if (flag == "--tls-key") {
      ok = a.value(flag, s.system.tls.key);
    } else if (flag == "--tls-ca") {
      ok = a.value(flag, s.system.tls.ca);
    } else if (flag == "--tls-allow") {
      ok = a.value(flag, v) && (s.tls_allow.push_back(v), true);
    } else if (flag == "--insecure") {
      s.insecure = true;
    } else if (flag == "--shared-memory") {
      s.system.shared_memory = true;
    } else {
      std::fprintf(stderr, "baton node: unknown argument '%s'%s (see baton help)\n",
                   flag.c_str(), flag_hint(flag).c_str());
      ok = false;
    }
    if (!ok)
      return 2;
  }
  return actors::run_node(s, interrupted, actors::all_roles());
}

/// The longest validity of `baton certs issue --days`: the 10 years of the
/// cluster CA (`baton certs init`), which a certificate cannot outlive.
constexpr int32_t max_certificate_days = 3650;

int cmd_certs(args& a) {
  auto what = a.done() ? std::string{} : a.take();
  std::string target, dir, v;
  bool force = false;
  int32_t days = 825;
  bool read = read_flags(a, "baton certs", [&](const std::string& flag) {
    if (flag == "--force")
      return force = true;
    if (flag == "--dir")
      return a.value(flag, dir);
    if (flag == "--days")
      return a.value(flag, v) && parse_in_range(flag, v, 1, max_certificate_days, days);
    if (!flag.empty() && flag[0] != '-' && target.empty())
      return target = flag, true;
    return false;
  });
  if (!read)
    return 2;
  caf::expected<actors::certificate_files> made = caf::error{};
  if (what == "init" && !target.empty() && dir.empty())
    made = actors::init_cluster_ca(target, force);
  else if (what == "issue" && !target.empty() && !dir.empty())
    made = actors::issue_certificate(target, dir, force, days);
  else {
    std::fprintf(stderr, "baton certs: expected `init DIR` or `issue NAME --dir DIR` "
                         "(see baton help)\n");
    return 2;
  }
  if (!made)
    return fail(made.error());
  std::printf("wrote %s (certificate) and %s (private key, mode 0600)\n",
              made->certificate.c_str(), made->key.c_str());
  return 0;
}

/// `baton bench NAME ...`: the bench of that name (apps/bench/).
int cmd_bench(args& a) {
  auto name = a.done() ? std::string{} : a.take();
  std::string names;
  for (const auto& bench : all_benches()) {
    if (bench.name == name)
      return bench.run(a, &interrupted);
    names += (names.empty() ? "'" : ", '") + bench.name + "'";
  }
  std::fprintf(stderr, "baton bench: expected one of %s (see baton help)\n", names.c_str());
  return 2;
}

int cmd_profile(args& a) {
  actors::profile_request r;
  std::string v;
  bool read = read_flags(a, "baton profile", [&](const std::string& flag) {
    int32_t n = 0;
    if (flag == "--out")
      return a.value(flag, r.out) && writable_output(flag, r.out);
    if (flag == "--microbatches")
      return a.value(flag, v) && parse_in_range(flag, v, 1, 100000, r.microbatches);
    if (flag == "--batch")
      return a.value(flag, v) && parse_in_range(flag, v, 1, 1 << 20, n) &&
             (r.microbatch_size = n, true);
    if (!flag.empty() && flag[0] != '-' && r.topology_path.empty())
      return r.topology_path = flag, true;
    return false;
  });
  if (!read)
    return 2;
  if (r.topology_path.empty() || r.out.empty()) {
    std::fprintf(stderr, "baton profile: expected TOPOLOGY.yaml and --out FILE (see baton help)\n");
    return 2;
  }
  if (!not_an_input("baton profile", "--out", r.out, {{"the topology", r.topology_path}}))
    return 2;
  auto profile = actors::run_profile(r);
  return profile ? 0 : fail(profile.error());
}

int cmd_plan(args& a) {
  actors::plan_request r;
  std::string v;
  bool read = read_flags(a, "baton plan", [&](const std::string& flag) {
    if (flag == "--profile")
      return a.value(flag, r.profile_path);
    // The partitioner's table grows with machines x layers^2: 1,000 took 4 s,
    // 100,000 ran for minutes.
    if (flag == "--machines")
      return a.value(flag, v) && parse_in_range(flag, v, 1, 1024, r.machines);
    if (flag == "--bandwidth")
      return a.value(flag, v) && parse_bandwidth(flag, v, r.bandwidth);
    if (flag == "--memory")
      return a.value(flag, v) && parse_positive(flag, v, r.memory);
    if (flag == "--straight")
      return r.straight = true;
    if (flag == "--weight-gradient")
      return a.value(flag, v) && (v == "here" || v == "next") &&
             (r.hand_on_weight_gradients = v == "next", true);
    if (flag == "--out")
      return a.value(flag, r.out) && writable_output(flag, r.out);
    if (flag == "--topology")
      return a.value(flag, r.topology_path);
    return false;
  });
  if (!read)
    return 2;
  if (r.profile_path.empty() || r.machines < 1) {
    std::fprintf(stderr, "baton plan: expected --profile FILE and --machines N (see baton help)\n");
    return 2;
  }
  if (!r.topology_path.empty() && r.out.empty()) {
    std::fprintf(stderr, "baton plan: --topology names the topology that --out writes with the "
                         "planned stages: give --out too\n");
    return 2;
  }
  if (!not_an_input("baton plan", "--out", r.out,
                    {{"--profile", r.profile_path}, {"--topology", r.topology_path}}))
    return 2;
  auto plan = actors::run_plan(r);
  return plan ? 0 : fail(plan.error());
}

} // namespace

/// The command line's command, in a fresh process (or in a child of the
/// suites' zygote: apps/zygote.hpp).
int run_command(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("baton"));
  spdlog::set_pattern("%H:%M:%S.%e %^%l%$ %v");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, on_broken_pipe);
  // Ctrl-Z stops the local node processes with baton, `fg` continues them.
  actors::stop_children_with_this_process();
  start_stop_watchdog();
  args a{{argv + 1, argv + argc}};
  set_known_flags(usage);
  if (a.done()) {
    std::fputs(usage, stdout);
    return 2;
  }
  auto command = a.take();
  if (command == "--version" || command == "version") {
    std::printf("baton %s\n", version_text);
    return 0;
  }
  // `baton COMMAND --help` anywhere on the line: that command's usage.
  for (const auto& arg : std::vector<std::string>{argv + 1, argv + argc})
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage_of(command).c_str(), stdout);
      return 0;
    }
  if (command == "run")
    return cmd_run(a, false);
  if (command == "pretrain")
    return cmd_run(a, true);
  if (command == "node")
    return cmd_node(a);
  if (command == "launch")
    return cmd_launch(a, interrupted);
  if (command == "bench")
    return cmd_bench(a);
  if (command == "compare")
    return cmd_compare(a, &interrupted);
  if (command == "predict")
    return cmd_predict(a, &interrupted);
  if (command == "report")
    return cmd_report(a);
  if (command == "profile")
    return cmd_profile(a);
  if (command == "plan")
    return cmd_plan(a);
  if (command == "certs")
    return cmd_certs(a);
  const std::vector<std::string> commands{"run",     "pretrain", "node",    "launch", "bench",
                                          "compare", "predict",  "report",  "profile", "plan",
                                          "certs",   "help",     "--version"};
  if (command == "help") {
    const auto of = a.done() ? std::string{} : a.take();
    if (!of.empty() && std::find(commands.begin(), commands.end(), of) == commands.end()) {
      std::fprintf(stderr, "baton help: no command '%s'%s\n", of.c_str(),
                   hint_among(of, commands).c_str());
      return 2;
    }
    std::fputs(of.empty() ? usage : usage_of(of).c_str(), stdout);
    return 0;
  }
  const auto hint = hint_among(command, commands);
  std::fprintf(stderr, "baton: unknown command '%s'%s\n%s", command.c_str(), hint.c_str(), usage);
  return 2;
}

int main(int argc, char** argv) {
  if (const char* socket = std::getenv("BATON_TEST_ZYGOTE"); socket != nullptr && *socket)
    return baton::apps::serve_zygote(socket, run_command);
  return run_command(argc, argv);
}

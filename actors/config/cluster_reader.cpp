// The cluster's sections: the nodes, the runtime (windows, threads,
// timeouts, checkpoints, TLS) and the faults to inject.

#include <limits>
#include <optional>

#include "actors/config/topology_parts.hpp"
#include "actors/net/system.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

namespace {

// `runtime.tls`: this run's certificate, key and CA, checked here because
// CAF aborts the process on files it cannot load.
tls_settings parse_tls(const field& section) {
  check_section(section);
  tls_settings tls;
  read_if(section, "certificate", tls.certificate, read_path);
  read_if(section, "key", tls.key, read_path);
  read_if(section, "ca", tls.ca, read_path);
  if (auto err = check_tls_files(tls))
    section.fail("'runtime.tls' (or --tls-cert, --tls-key, --tls-ca): " + describe(err));
  return tls;
}

// `runtime.compute_threads`, or its older name `runtime.stage_threads`: not both.
void parse_compute_threads(const field& section, runtime_spec& r) {
  std::optional<field> f = section.get("compute_threads"), older = section.get("stage_threads");
  if (f && older)
    older->fail("give runtime.compute_threads or runtime.stage_threads, not both "
                "(runtime.stage_threads is its older name)");
  if (!f)
    f = older;
  if (f)
    r.compute_threads = read_compute_threads(*f);
  r.compute_threads_asked = f.has_value();
}

} // namespace

void detail::parse_runtime(const field& section, runtime_spec& r) {
  check_section(section);
  // Messages in flight per edge; each may be 64 MiB, and the receiver holds them.
  read_if(section, "window", r.window, [](const field& f) {
    auto window = positive_int32(f);
    if (window > 256)
      f.expected("a positive integer at most 256 (messages in flight per edge)");
    return window;
  });
  read_if(section, "scheduler_threads", r.scheduler_threads, [](const field& f) {
    return read_integer<int32_t>(f, 1, max_scheduler_threads,
                                 "a number of threads from 1 to "
                                   + std::to_string(max_scheduler_threads));
  });
  parse_compute_threads(section, r);
  read_if(section, "heartbeat_ms", r.heartbeat_interval, positive_milliseconds);
  read_if(section, "connection_timeout_ms", r.connection_timeout, positive_milliseconds);
  read_if(section, "request_timeout_ms", r.request_timeout, positive_milliseconds);
  read_if(section, "progress_every", r.progress_every, positive_int32);
  read_if(section, "checkpoint_every", r.checkpoint_every, [](const field& f) {
    return read_integer<int32_t>(f, 0, std::numeric_limits<int32_t>::max(),
                                 "a number of steps (0: no checkpoints)");
  });
  read_if(section, "checkpoint_dir", r.checkpoint_dir, read_path);
  read_if(section, "max_restarts", r.max_restarts, [](const field& f) {
    return read_integer<int32_t>(f, 0, 1000, "a number of restarts from 0 to 1000");
  });
  read_if(section, "stall_timeout_ms", r.stall_timeout, positive_milliseconds);
  read_if(section, "slow_node_timeout_ms", r.slow_node_timeout, positive_milliseconds);
  read_if(section, "stop_after_seconds", r.stop_after_seconds, [](const field& f) {
    return read_number(f, "a number of seconds above 0", [](double x) { return x > 0; });
  });
  read_if(section, "shared_memory", r.shared_memory, read_bool);
  if (auto f = section.get("tls"))
    r.tls = parse_tls(*f);
}

namespace {

// The edge of a delay or drop fault: `from` sends to `to` (an edge of the
// job's plan, checked when it is made: actors/runtime/plan_checks.hpp).
void read_edge_fault(const field& item, fault_spec& f) {
  f.from = read_name(item.require("from"));
  f.to = read_name(item.require("to"));
  if (f.kind == "delay")
    f.delay = positive_milliseconds(item.require("delay_ms"));
  else if (f.at_step < 0)
    item.fail("fault 'drop' needs at_step (the step whose first microbatch is dropped)");
}

fault_spec parse_fault(const field& item) {
  check_section(item);
  fault_spec f;
  f.where = item.where();
  f.kind = read_choice(item.require("kind"),
                       {"throw", "kill_node", "stop_node", "delay", "drop", "chaos"});
  read_if(item, "at_step", f.at_step, non_negative_int64);
  read_if(item, "after_ms", f.after, positive_milliseconds);
  auto only = [&](const std::vector<std::string>& keys) {
    for (const auto* key : {"actor", "node", "at_step", "after_ms", "stopped_ms", "from", "to",
                            "delay_ms", "rate", "seed"})
      if (item.get(key) && !contains(keys, key))
        item.fail("fault '" + f.kind + "' takes " + join(keys) + " (not " + key + ")");
  };
  if (f.kind == "delay" || f.kind == "drop") {
    only({"kind", "from", "to", f.kind == "delay" ? "delay_ms" : "at_step"});
    read_edge_fault(item, f);
    return f;
  }
  if (f.kind == "chaos") {
    only({"kind", "rate", "seed"});
    f.rate = read_number(item.require("rate"), "a probability per step in (0, 1]",
                         [](double x) { return x > 0 && x <= 1; });
    read_if(item, "seed", f.seed, [](const field& s) {
      return read_integer<uint64_t>(s, 0, std::numeric_limits<uint64_t>::max(), "a seed");
    });
    return f;
  }
  if (f.kind == "throw") {
    // A trainable actor of the job's plan, checked when it is made.
    f.actor = read_name(item.require("actor"));
    if (f.at_step < 0)
      item.fail("fault 'throw' needs at_step (the step during which the actor throws)");
    if (item.get("node") || item.get("after_ms") || item.get("stopped_ms"))
      item.fail("fault 'throw' takes kind, actor and at_step only");
  } else {
    // Nodes are checked when the job starts: `--local-nodes` makes them later.
    f.node = read_name(item.require("node"));
    if ((f.at_step < 0) == (f.after.count() < 0))
      item.fail("fault '" + f.kind + "' needs exactly one of at_step and after_ms");
    if (item.get("actor"))
      item.fail("fault '" + f.kind + "' names a node, not an actor");
    if (f.kind == "stop_node")
      f.stopped = positive_milliseconds(item.require("stopped_ms"));
    else if (item.get("stopped_ms"))
      item.fail("stopped_ms applies to kind stop_node only");
  }
  return f;
}

// A fault at a step the job never reaches would never fire: a run "with a
// fault" that has none. Refused when the job's length is known here.
void check_fault_step(const field& item, const fault_spec& f,
                      const std::optional<job_length>& length) {
  std::optional<field> at_step = item.get("at_step");
  if (!at_step || !length || f.at_step < length->steps)
    return;
  const std::string& step = length->step;
  const std::string expected =
    length->steps == 0 ? "expected no fault at a " + step
                       : "expected a " + step + " from 0 to " + std::to_string(length->steps - 1);
  at_step->fail(at_step->name() + " is " + std::to_string(f.at_step) + ", but the job has "
                + std::to_string(length->steps) + " " + step + "s (" + length->how
                + "), so the fault would never fire (" + expected + ")");
}

} // namespace

std::vector<fault_spec> detail::parse_faults(const field& list,
                                             const std::optional<job_length>& length) {
  std::vector<fault_spec> faults;
  for (const field& item : list.items("a list of faults ({kind, actor | node, at_step | "
                                      "after_ms, stopped_ms})", max_faults)) {
    faults.push_back(parse_fault(item));
    check_fault_step(item, faults.back(), length);
  }
  return faults;
}

std::vector<node_address> detail::parse_nodes(const field& list) {
  std::vector<node_address> nodes;
  unique_names names("node"), addresses("address");
  for (const field& item : list.items("a list of nodes ({name, host, port})", max_nodes)) {
    check_section(item);
    node_address node;
    node.where = item.where();
    field name = item.require("name");
    node.name = read_new_name(name, "node");
    names.add(name, node.name);
    read_if(item, "host", node.host, read_string);
    field port = item.require("port");
    node.port = read_integer<uint16_t>(port, 1, 65535, "a port number from 1 to 65535");
    addresses.add(port, node.host + ":" + std::to_string(node.port));
    nodes.push_back(std::move(node));
  }
  return nodes;
}

} // namespace config
} // namespace baton::actors

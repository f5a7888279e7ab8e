// The cluster's sections: the nodes, the runtime (windows, threads,
// timeouts, checkpoints, TLS) and the faults to inject.

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/config/section_fields.hpp"
#include "actors/config/topology_parts.hpp"
#include "actors/net/system.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

namespace {

// `runtime.tls`: this run's certificate, key and CA, checked here because
// CAF aborts the process on files it cannot load.
const section_fields<tls_settings>& tls_fields() {
  static const section_fields<tls_settings> fields{
    {
      {"certificate", [](const field& f, const field&, tls_settings& tls) {
         tls.certificate = read_path(f);
       }},
      {"key", [](const field& f, const field&, tls_settings& tls) { tls.key = read_path(f); }},
      {"ca", [](const field& f, const field&, tls_settings& tls) { tls.ca = read_path(f); }},
    },
    [](const field& section, tls_settings& tls) {
      if (auto err = check_tls_files(tls))
        section.fail("'runtime.tls' (or --tls-cert, --tls-key, --tls-ca): " + describe(err));
    }};
  return fields;
}

// `runtime.compute_threads`, or its older name `runtime.stage_threads`: not both.
void set_compute_threads(const field& f, runtime_spec& r) {
  r.compute_threads = read_compute_threads(f);
  r.compute_threads_asked = true;
}

const section_fields<runtime_spec>& runtime_fields() {
  static const section_fields<runtime_spec> fields{{
    // Messages in flight per edge; each may be 64 MiB, and the receiver holds them.
    {"window", [](const field& f, const field&, runtime_spec& r) {
       r.window = positive_int32(f);
       if (r.window > 256)
         f.expected("a positive integer at most 256 (messages in flight per edge)");
     }},
    {"scheduler_threads", [](const field& f, const field&, runtime_spec& r) {
       r.scheduler_threads = read_integer<int32_t>(
         f, 1, max_scheduler_threads,
         "a number of threads from 1 to " + std::to_string(max_scheduler_threads));
     }},
    {"compute_threads", [](const field& f, const field& section, runtime_spec& r) {
       if (auto older = section.get("stage_threads"))
         older->fail("give runtime.compute_threads or runtime.stage_threads, not both "
                     "(runtime.stage_threads is its older name)");
       set_compute_threads(f, r);
     }},
    {"stage_threads", [](const field& f, const field&, runtime_spec& r) {
       set_compute_threads(f, r);
     }},
    {"heartbeat_ms", [](const field& f, const field&, runtime_spec& r) {
       r.heartbeat_interval = positive_milliseconds(f);
     }},
    {"connection_timeout_ms", [](const field& f, const field&, runtime_spec& r) {
       r.connection_timeout = positive_milliseconds(f);
     }},
    {"request_timeout_ms", [](const field& f, const field&, runtime_spec& r) {
       r.request_timeout = positive_milliseconds(f);
     }},
    {"start_timeout_ms", [](const field& f, const field&, runtime_spec& r) {
       r.start_timeout = positive_milliseconds(f);
     }},
    {"progress_every", [](const field& f, const field&, runtime_spec& r) {
       r.progress_every = positive_int32(f);
     }},
    {"checkpoint_every", [](const field& f, const field&, runtime_spec& r) {
       r.checkpoint_every = read_integer<int32_t>(f, 0, std::numeric_limits<int32_t>::max(),
                                                  "a number of steps (0: no checkpoints)");
     }},
    {"checkpoint_dir", [](const field& f, const field&, runtime_spec& r) {
       r.checkpoint_dir = read_path(f);
     }},
    {"max_restarts", [](const field& f, const field&, runtime_spec& r) {
       r.max_restarts = read_integer<int32_t>(f, 0, 1000, "a number of restarts from 0 to 1000");
     }},
    {"stall_timeout_ms", [](const field& f, const field&, runtime_spec& r) {
       r.stall_timeout = positive_milliseconds(f);
     }},
    {"slow_node_timeout_ms", [](const field& f, const field&, runtime_spec& r) {
       r.slow_node_timeout = positive_milliseconds(f);
     }},
    // The workload's target_accuracy in its older place: read with it
    // (parse_target_accuracy), which refuses both.
    {"stop_at_accuracy", [](const field&, const field&, runtime_spec&) {}},
    {"stop_after_seconds", [](const field& f, const field&, runtime_spec& r) {
       r.stop_after_seconds =
         read_number(f, "a number of seconds above 0", [](double x) { return x > 0; });
     }},
    {"shared_memory", [](const field& f, const field&, runtime_spec& r) {
       r.shared_memory = read_bool(f);
     }},
    {"tls", [](const field& f, const field&, runtime_spec& r) { tls_fields().read(f, r.tls); }},
  }};
  return fields;
}

void parse_runtime(const field& section, runtime_spec& r) {
  runtime_fields().read(section, r);
}

// The kinds of fault and the keys each takes: any other is refused, not
// ignored.
using fault_kind = std::pair<std::string, std::vector<std::string>>;
const std::vector<fault_kind>& fault_kinds() {
  static const std::vector<fault_kind> kinds = {
    {"throw", {"kind", "actor", "at_step"}},
    {"kill_node", {"kind", "node", "at_step", "after_ms"}},
    {"stop_node", {"kind", "node", "at_step", "after_ms", "stopped_ms"}},
    {"delay", {"kind", "from", "to", "delay_ms"}},
    {"drop", {"kind", "from", "to", "at_step"}},
    {"chaos", {"kind", "rate", "seed"}},
  };
  return kinds;
}

// What each kind needs, once its keys are read. A throw names a trainable
// actor of the job's plan and an edge fault an edge of it (both checked when
// the plan is made: actors/runtime/plan_checks.hpp); a node fault's node is
// checked when the job starts (`--local-nodes` makes them later).
void check_fault(const field& item, fault_spec& f) {
  if (f.kind == "throw") {
    item.require("actor");
    if (f.at_step < 0)
      item.fail("fault 'throw' needs at_step (the step during which the actor throws)");
  } else if (f.kind == "kill_node" || f.kind == "stop_node") {
    item.require("node");
    if ((f.at_step < 0) == (f.after.count() < 0))
      item.fail("fault '" + f.kind + "' needs exactly one of at_step and after_ms");
    if (f.kind == "stop_node")
      item.require("stopped_ms");
  } else if (f.kind == "delay" || f.kind == "drop") {
    item.require("from");
    item.require("to");
    if (f.kind == "delay")
      item.require("delay_ms");
    else if (f.at_step < 0)
      item.fail("fault 'drop' needs at_step (the step whose first microbatch is dropped)");
  } else if (f.kind == "chaos") {
    item.require("rate");
  }
}

const section_fields<fault_spec>& fault_fields() {
  static const section_fields<fault_spec> fields{
    {
      {"kind",
       [](const field& value, const field& item, fault_spec& f) {
         std::vector<std::string> kinds;
         for (const auto& [kind, keys] : fault_kinds())
           kinds.push_back(kind);
         f.kind = read_choice(value, kinds);
         const std::vector<std::string>& takes =
           std::find_if(fault_kinds().begin(), fault_kinds().end(),
                        [&](const fault_kind& k) { return k.first == f.kind; })
             ->second;
         for (const auto& entry : item.node())
           if (const std::string& key = entry.first.Scalar(); !contains(takes, key))
             item.child(entry.first, entry.second)
               .fail("fault '" + f.kind + "' takes " + join(takes) + " (not " + key + ")");
       },
       true},
      {"actor", [](const field& v, const field&, fault_spec& f) { f.actor = read_name(v); }},
      {"node", [](const field& v, const field&, fault_spec& f) { f.node = read_name(v); }},
      {"at_step",
       [](const field& v, const field&, fault_spec& f) { f.at_step = non_negative_int64(v); }},
      {"after_ms",
       [](const field& v, const field&, fault_spec& f) { f.after = positive_milliseconds(v); }},
      {"stopped_ms",
       [](const field& v, const field&, fault_spec& f) { f.stopped = positive_milliseconds(v); }},
      {"from", [](const field& v, const field&, fault_spec& f) { f.from = read_name(v); }},
      {"to", [](const field& v, const field&, fault_spec& f) { f.to = read_name(v); }},
      {"delay_ms",
       [](const field& v, const field&, fault_spec& f) { f.delay = positive_milliseconds(v); }},
      {"rate",
       [](const field& v, const field&, fault_spec& f) {
         f.rate = read_number(v, "a probability per step in (0, 1]",
                              [](double x) { return x > 0 && x <= 1; });
       }},
      {"seed",
       [](const field& v, const field&, fault_spec& f) {
         f.seed = read_integer<uint64_t>(v, 0, std::numeric_limits<uint64_t>::max(), "a seed");
       }},
    },
    check_fault};
  return fields;
}

std::vector<fault_spec> parse_faults(const field& list) {
  std::vector<fault_spec> faults;
  for (const field& item : list.items("a list of faults ({kind, actor | node, at_step | "
                                      "after_ms, stopped_ms})", max_faults)) {
    fault_spec f;
    f.where = item.where();
    fault_fields().read(item, f);
    faults.push_back(std::move(f));
  }
  return faults;
}

const section_fields<node_address>& node_fields() {
  static const section_fields<node_address> fields{{
    {"name",
     [](const field& v, const field&, node_address& n) { n.name = read_new_name(v, "node"); },
     true},
    {"host", [](const field& v, const field&, node_address& n) { n.host = read_string(v); }},
    {"port",
     [](const field& v, const field&, node_address& n) {
       n.port = read_integer<uint16_t>(v, 1, 65535, "a port number from 1 to 65535");
     },
     true},
  }};
  return fields;
}

std::vector<node_address> parse_nodes(const field& list) {
  std::vector<node_address> nodes;
  unique_names names("node"), addresses("address");
  for (const field& item : list.items("a list of nodes ({name, host, port})", max_nodes)) {
    node_address node;
    node.where = item.where();
    node_fields().read(item, node);
    names.add(item.require("name"), node.name);
    addresses.add(item.require("port"), node.host + ":" + std::to_string(node.port));
    nodes.push_back(std::move(node));
  }
  return nodes;
}

} // namespace

void detail::read_cluster(const field& root, topology& t) {
  t.nodes = parse_nodes(root.section("nodes"));
  parse_runtime(root.section("runtime"), t.runtime);
  t.faults = parse_faults(root.section("faults"));
}

std::map<std::string, std::vector<std::string>> detail::cluster_section_keys() {
  return {{"runtime", runtime_fields().keys()},
          {"runtime.tls", tls_fields().keys()},
          {"faults.*", fault_fields().keys()},
          {"nodes.*", node_fields().keys()}};
}

} // namespace config
} // namespace baton::actors

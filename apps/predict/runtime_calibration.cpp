#include "apps/predict/runtime_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/flow/cpu_time.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/net/system.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using actors::pulse_atom;

constexpr int32_t local_trips = 4000;
constexpr int32_t remote_trips = 400;
constexpr int32_t trips_per_size = 9;
constexpr int32_t warm_up = 3;
/// Float tensors of 64 kB, 256 kB, 1 MB and 4 MB.
constexpr int64_t sized_floats[] = {16 << 10, 64 << 10, 256 << 10, 1 << 20};
constexpr auto request_timeout = std::chrono::seconds(10);
constexpr const char* runtime_file = "runtime.json";

const char* runtime_method =
  "a `baton node` on 127.0.0.1 (no shared memory) and this process's actor system: an "
  "event-based actor sends the node's pulse 400 bare messages, each after the last one's "
  "answer, then float tensors of 64 kB to 4 MB (a tensor_set, 9 each, answered bare); and "
  "4000 bare messages to a pulse actor of this process; medians after 3 warm-up trips. Per "
  "end of a message: message_seconds = the local round trip / 4; remote_message_seconds = "
  "(the remote round trip / 2 - the loopback socket's latency and message_overhead) / 2 - "
  "message_seconds; byte_seconds = (the sized one-way times' least-squares slope - 1 / the "
  "loopback socket's bandwidth) / 2; io_byte_seconds = the least-squares slope of both "
  "processes' CPU seconds per sized trip (this one and the node, every thread) / 2 - "
  "byte_seconds; colocation 0 (the profile is taken with as many copies side by side as "
  "compute at once; a pipeline's rows set the workload's own)";

/// The least-squares slope of seconds over bytes; none with fewer than two
/// sizes.
std::optional<double> slope_of(const std::vector<link_sample>& samples) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& s : samples) {
    n += 1;
    sx += s.bytes;
    sy += s.seconds;
    sxx += s.bytes * s.bytes;
    sxy += s.bytes * s.seconds;
  }
  const double spread = n * sxx - sx * sx;
  if (n < 2 || spread <= 0)
    return std::nullopt;
  return (n * sxy - sx * sy) / spread;
}

/// The median of the round trips after the first `warm_up`.
double settled_median(const std::vector<double>& seconds) {
  const auto skipped = std::min<size_t>(warm_up, seconds.size());
  return median_of({seconds.begin() + static_cast<long>(skipped), seconds.end()});
}

/// The messages a driver sends in turn, each after the last one's answer,
/// and each one's round trip.
struct trips {
  caf::actor target;
  std::vector<std::optional<messages::tensor_set>> messages;
  std::vector<double> seconds;
  clock_type::time_point sent;
};

/// Sends `t`'s messages to its target in turn, timing each answer
/// (pulse_atom); (ok_atom) to `done` after the last one, or at once when the
/// target goes away.
caf::behavior driver(caf::event_based_actor* self, std::shared_ptr<trips> t, caf::actor done) {
  const auto next = [self, t, done] {
    const size_t k = t->seconds.size();
    if (k == t->messages.size()) {
      self->send(done, caf::ok_atom::value);
      self->quit();
      return;
    }
    t->sent = clock_type::now();
    if (t->messages[k])
      self->send(t->target, pulse_atom::value, *t->messages[k]);
    else
      self->send(t->target, pulse_atom::value);
  };
  self->monitor(t->target);
  self->set_down_handler([self, done](const caf::down_msg&) {
    self->send(done, caf::ok_atom::value);
    self->quit();
  });
  return {
    [next](caf::ok_atom) { next(); },
    [t, next](pulse_atom) {
      t->seconds.push_back(
        std::chrono::duration<double>(clock_type::now() - t->sent).count());
      next();
    },
  };
}

/// Runs `t` from `self`'s system; the round trips, or an error when the
/// target answered fewer than all (it went away) or not within a minute.
caf::expected<std::vector<double>> run_trips(caf::scoped_actor& self, std::shared_ptr<trips> t) {
  auto d = self->spawn(driver, t, caf::actor_cast<caf::actor>(self));
  self->send(d, caf::ok_atom::value);
  bool finished = false;
  self->receive([&](caf::ok_atom) { finished = true; },
                caf::after(std::chrono::seconds(60)) >> [] {});
  if (!finished) { // the driver may still write `t`: not read
    self->send_exit(d, caf::exit_reason::user_shutdown);
    return make_error(errc::node_unreachable,
                      "the runtime calibration's node did not answer within a minute");
  }
  if (t->seconds.size() != t->messages.size())
    return make_error(errc::node_unreachable,
                      "the runtime calibration's node answered " +
                        std::to_string(t->seconds.size()) + " of " +
                        std::to_string(t->messages.size()) + " messages");
  return std::move(t->seconds);
}

/// `count` bare messages to `target`: the median round trip after the warm-up.
caf::expected<double> bare_round_trip(caf::scoped_actor& self, const caf::actor& target,
                                      int32_t count) {
  auto t = std::make_shared<trips>();
  t->target = target;
  t->messages.resize(static_cast<size_t>(count + warm_up));
  auto seconds = run_trips(self, t);
  if (!seconds)
    return seconds.error();
  return settled_median(*seconds);
}

/// What one size's trips measured.
struct size_measured {
  double seconds = 0;     ///< the median round trip
  double cpu_seconds = 0; ///< both processes' CPU per trip (-1: not read)
};

/// A tensor of each of sized_floats' sizes to `target`, trips_per_size times
/// each (after the warm-up): each size's median round trip and the CPU a
/// trip took in this process and `node` (every thread of both).
caf::expected<std::vector<size_measured>> sized_round_trips(caf::scoped_actor& self,
                                                            const caf::actor& target, pid_t node) {
  const auto both_cpu = [node] {
    const double there = actors::process_cpu_seconds(node);
    return there < 0 ? -1.0 : there + actors::process_cpu_seconds();
  };
  std::vector<size_measured> out;
  for (int64_t floats : sized_floats) {
    messages::tensor_set m;
    m.kind = "gradients";
    m.from = "calibration";
    m.tensors.push_back(at::ones({floats}));
    auto t = std::make_shared<trips>();
    t->target = target;
    t->messages.assign(static_cast<size_t>(trips_per_size + warm_up), m);
    const double before = both_cpu();
    auto seconds = run_trips(self, t);
    if (!seconds)
      return seconds.error();
    const double after = both_cpu();
    out.push_back({settled_median(*seconds),
                   before < 0 || after < 0
                     ? -1.0
                     : (after - before) / static_cast<double>(t->messages.size())});
  }
  return out;
}

caf::expected<runtime_calibration> measure(const model::cost::link_model& loopback) {
  actors::system_settings settings;
  settings.shared_memory = false;
  auto work = actors::make_work_directory("baton-runtime-calibration");
  if (!work)
    return work.error();
  actors::owned_directory owned{*work};
  auto nodes = actors::local_cluster::start(1, settings, *work);
  if (!nodes)
    return nodes.error();
  caf::actor_system_config cfg;
  actors::configure(cfg, settings);
  caf::actor_system sys{cfg};
  runtime_calibration c;
  {
    caf::scoped_actor self{sys};
    const auto& node = nodes->addresses().front();
    // Through the guarded transport, as a run connects to its nodes.
    auto spawner = actors::remote_actor_framed(sys, node.host, node.port);
    if (!spawner)
      return make_error(errc::node_unreachable, "the runtime calibration's node on port " +
                                                  std::to_string(node.port) + ": " +
                                                  sys.render(spawner.error()));
    caf::actor pulse;
    caf::error failed;
    self->request(*spawner, request_timeout, caf::get_atom::value, pulse_atom::value)
      .receive([&](caf::actor& a) { pulse = std::move(a); },
               [&](caf::error& e) { failed = std::move(e); });
    if (!pulse)
      return make_error(errc::node_unreachable,
                        "the runtime calibration's node gave no pulse: " + sys.render(failed));
    auto remote = bare_round_trip(self, pulse, remote_trips);
    if (!remote)
      return remote.error();
    auto sized = sized_round_trips(self, pulse, nodes->pids().front());
    if (!sized)
      return sized.error();
    auto here = self->spawn<caf::hidden>(actors::pulse_behavior);
    auto local = bare_round_trip(self, here, local_trips);
    self->send_exit(here, caf::exit_reason::user_shutdown);
    if (!local)
      return local.error();
    c.local_round_trip = *local;
    c.remote_round_trip = *remote;
    for (size_t k = 0; k < sized->size(); ++k) {
      const double bytes = 4.0 * static_cast<double>(sized_floats[k]);
      c.samples.push_back({bytes, (*sized)[k].seconds - *remote / 2});
      if ((*sized)[k].cpu_seconds >= 0)
        c.cpu_samples.push_back({bytes, (*sized)[k].cpu_seconds});
    }
  }
  nodes->stop();
  c.costs = runtime_costs_of(c.local_round_trip, c.remote_round_trip, c.samples, loopback,
                             c.cpu_samples);
  return c;
}

caf::expected<runtime_calibration> read_kept(const std::string& path) {
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("byte_seconds"))
    return make_error(errc::bad_file, path + ": not a runtime calibration");
  if (!j.contains("io_byte_seconds")) // kept before the CPU of a message was measured
    return make_error(errc::bad_file, path + ": no io_byte_seconds");
  runtime_calibration c;
  c.costs.message_seconds = j.value("message_seconds", -1.0);
  c.costs.remote_message_seconds = j.value("remote_message_seconds", -1.0);
  c.costs.byte_seconds = j.value("byte_seconds", -1.0);
  c.costs.io_byte_seconds = j.value("io_byte_seconds", -1.0);
  c.costs.colocation = j.value("colocation", -1.0);
  for (double v : {c.costs.message_seconds, c.costs.remote_message_seconds,
                   c.costs.byte_seconds, c.costs.io_byte_seconds, c.costs.colocation})
    if (!(v >= 0 && v < 1))
      return make_error(errc::bad_file, path + ": a cost is not in [0, 1)");
  c.machine = j.value("machine", "");
  if (c.machine != machine_text())
    return make_error(errc::bad_file, path + ": measured on another machine (" + c.machine + ")");
  c.method = j.value("method", "");
  c.local_round_trip = j.value("local_round_trip", 0.0);
  c.remote_round_trip = j.value("remote_round_trip", 0.0);
  c.samples = samples_of(j.value("samples", nlohmann::json::array()));
  c.cpu_samples = samples_of(j.value("cpu_samples", nlohmann::json::array()));
  c.cache_file = path;
  c.cached = true;
  return c;
}

} // namespace

nlohmann::json to_json(const runtime_calibration& c) {
  return {{"message_seconds", c.costs.message_seconds},
          {"remote_message_seconds", c.costs.remote_message_seconds},
          {"byte_seconds", c.costs.byte_seconds},
          {"io_byte_seconds", c.costs.io_byte_seconds},
          {"colocation", c.costs.colocation},
          {"machine", c.machine},
          {"method", c.method},
          {"local_round_trip", c.local_round_trip},
          {"remote_round_trip", c.remote_round_trip},
          {"samples", samples_json(c.samples)},
          {"cpu_samples", samples_json(c.cpu_samples)}};
}

std::string machine_text() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos)
        model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

model::cost::runtime_costs runtime_costs_of(double local_round_trip, double remote_round_trip,
                                            const std::vector<link_sample>& samples,
                                            const model::cost::link_model& loopback,
                                            const std::vector<link_sample>& cpu_samples) {
  model::cost::runtime_costs out;
  out.message_seconds = std::max(0.0, local_round_trip / 4);
  const double socket_fixed = loopback.latency + loopback.message_overhead;
  out.remote_message_seconds =
    std::max(0.0, (remote_round_trip / 2 - socket_fixed) / 2 - out.message_seconds);
  if (const auto slope = slope_of(samples)) {
    const double socket = std::isfinite(loopback.bandwidth) && loopback.bandwidth > 0
                            ? 1 / loopback.bandwidth
                            : 0;
    out.byte_seconds = std::max(0.0, (*slope - socket) / 2);
  }
  if (const auto cpu = slope_of(cpu_samples))
    out.io_byte_seconds = std::max(0.0, *cpu / 2 - out.byte_seconds);
  return out;
}

caf::expected<runtime_calibration> calibrate_runtime(const model::cost::link_model& loopback,
                                                     const std::string& cache_dir) {
  const std::string path = cache_dir.empty() ? "" : cache_dir + "/" + runtime_file;
  if (!path.empty() && fs::exists(path))
    if (auto cached = read_kept(path))
      return cached;
  auto c = measure(loopback);
  if (!c)
    return c.error();
  c->machine = machine_text();
  c->method = runtime_method;
  if (!path.empty())
    c->cache_file = keep_calibration(cache_dir, runtime_file, to_json(*c));
  return c;
}

} // namespace baton::apps

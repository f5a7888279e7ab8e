#include <algorithm>
#include "actors/runtime/job_nodes.hpp"

#include <thread>

#include <caf/all.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "actors/flow/protocols.hpp"
#include "actors/net/tls.hpp"
#include "actors/runtime/placement.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {
inline namespace runtime {

caf::error job_nodes::connect(const cluster& c, const std::string& file,
                              std::vector<role_type> roles) {
  auto& sys = self_->system();
  if (c.embedded()) {
    spawner_policy policy;
    policy.roles = std::move(roles);
    embedded_spawner_ = spawn_spawner(sys, "embedded", std::move(policy));
    spawners_[""] = embedded_spawner_;
    cores_[""] = static_cast<int32_t>(std::thread::hardware_concurrency());
    return caf::none;
  }
  for (const auto& n : c.nodes) {
    auto spawner = connect_node(sys, n.host, n.port, n.name, c.runtime.tls, timeout_);
    if (!spawner)
      return make_error(errc::node_unreachable,
                        (n.where.empty() ? file : n.where) + ": node '" + n.name + "' at " +
                          n.host + ":" + std::to_string(n.port) +
                          " is unreachable (is `baton node` running there?): " +
                          sys.render(spawner.error()));
    self_->monitor(*spawner);
    spawners_[n.name] = *spawner;
    self_->request(*spawner, timeout_, caf::get_atom::value, node_atom::value)
      .receive([&](messages::node_report& r) { cores_[n.name] = r.cores; },
               [&](caf::error& err) {
                 spdlog::warn("node {} did not report its resources: {}", n.name,
                              describe(err));
               });
  }
  connect_peers(c);
  start_watch(c);
  return caf::none;
}

void job_nodes::start_watch(const cluster& c) {
  limits_ = liveness_limits_of(c);
  std::vector<std::pair<std::string, caf::actor>> pulses;
  for (const auto& [node, spawner] : spawners_)
    self_->request(spawner, timeout_, caf::get_atom::value, pulse_atom::value)
      .receive([&, name = node](caf::actor& pulse) { pulses.emplace_back(name, pulse); },
               [&, name = node](caf::error& err) {
                 spdlog::warn("node {} gives no pulse to watch (only a closed connection will "
                              "show it lost): {}", name, describe(err));
               });
  watch_ = spawn_node_watch(self_->system(), caf::actor_cast<caf::actor>(self_), limits_,
                            std::move(pulses));
}

void job_nodes::connect_peers(const cluster& c) {
  if (c.runtime.tls.enabled())
    return;
  for (size_t i = 0; i < c.nodes.size(); ++i)
    for (size_t j = i + 1; j < c.nodes.size(); ++j) {
      const auto& from = c.nodes[i];
      const auto& to = c.nodes[j];
      self_->request(spawners_.at(from.name), timeout_, connect_atom::value, to.host, to.port)
        .receive([](caf::ok_atom) {},
                 [&](caf::error& err) {
                   spdlog::warn("nodes {} and {} will talk through this process: {}",
                                from.name, to.name, describe(err));
                 });
    }
}

std::vector<std::string> job_nodes::live() const {
  std::vector<std::string> live;
  for (const auto& [node, spawner] : spawners_)
    live.push_back(node);
  return live;
}

const caf::actor* job_nodes::spawner_of(const std::string& node) const {
  auto it = spawners_.find(node);
  return it == spawners_.end() ? nullptr : &it->second;
}

std::string job_nodes::node_for(const std::string& placed,
                                std::map<std::string, size_t> actors_on) {
  auto choice = actors::node_for(placed, placement{live(), lost_, std::move(actors_on), moved_});
  if (choice.moves) {
    spdlog::warn("node '{}' is lost: its actors move to node '{}'", placed, choice.node);
    moved_[placed] = choice.node;
  }
  return choice.node;
}

std::optional<std::string> job_nodes::lose(const caf::actor_addr& source) {
  for (const auto& [node, spawner] : spawners_)
    if (spawner.address() == source) {
      auto lost = node;
      spawners_.erase(lost);
      lost_.insert(lost);
      return lost;
    }
  return std::nullopt;
}

std::optional<std::string> job_nodes::late(const std::string& node, int64_t silent_ms) {
  if (spawners_.count(node) == 0)
    return std::nullopt; // lost already
  auto seconds = fmt::format("{:.1f} s", silent_ms / 1000.0);
  if (silent_ms < limits_.lost.count()) {
    spdlog::warn("node '{}' has not answered for {} but its connection is open (a slow or "
                 "stopped process): this job cannot recover a lost node, so it waits for it up "
                 "to {} ms (runtime.slow_node_timeout_ms)",
                 node, seconds, limits_.lost.count());
    return std::nullopt;
  }
  spawners_.erase(node);
  lost_.insert(node);
  bool waited = limits_.lost > limits_.late;
  return "lost node '" + node + "': no answer for " + seconds + " (" +
         (waited ? "runtime.slow_node_timeout_ms " : "runtime.connection_timeout_ms ") +
         std::to_string(limits_.lost.count()) + "), its connection still open: the process "
         "hangs or its host or link is down";
}

void job_nodes::back(const std::string& node, int64_t silent_ms) const {
  if (spawners_.count(node) != 0)
    spdlog::info("node '{}' answers again after {:.1f} s", node, silent_ms / 1000.0);
}

void job_nodes::collect_reports(const cluster& c, std::vector<messages::node_report>& into) {
  if (c.embedded()) {
    into.push_back(current_node_report("embedded"));
    return;
  }
  for (const auto& n : c.nodes) {
    auto spawner = spawners_.find(n.name);
    if (spawner == spawners_.end()) // lost during the run
      continue;
    self_->request(spawner->second, timeout_, caf::get_atom::value, node_atom::value)
      .receive([&](messages::node_report& r) { into.push_back(std::move(r)); },
               [&](caf::error& err) {
                 spdlog::warn("node {} did not report its usage: {}", n.name, describe(err));
               });
  }
  into.push_back(current_node_report("coordinator"));
}

void job_nodes::shutdown() {
  if (watch_)
    self_->send_exit(watch_, caf::exit_reason::kill);
  watch_ = nullptr;
  if (embedded_spawner_)
    self_->send_exit(embedded_spawner_, caf::exit_reason::kill);
  embedded_spawner_ = nullptr;
}

void cpu_since(const std::vector<messages::node_report>& started,
               std::vector<messages::node_report>& ended) {
  for (auto& node : ended)
    for (const auto& before : started)
      if (before.name == node.name)
        node.cpu_seconds = std::max(0.0, node.cpu_seconds - before.cpu_seconds);
}

} // namespace runtime
} // namespace baton::actors

#include "actors/runtime/job_nodes.hpp"

#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/flow/interfaces.hpp"
#include "actors/net/tls.hpp"
#include "actors/runtime/placement.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {
inline namespace runtime {

caf::error job_nodes::connect(const topology& t, std::vector<role_type> roles) {
  auto& sys = self_->system();
  if (t.embedded()) {
    spawner_policy policy;
    policy.roles = std::move(roles);
    embedded_spawner_ = spawn_spawner(sys, "embedded", std::move(policy));
    spawners_[""] = embedded_spawner_;
    cores_[""] = static_cast<int32_t>(std::thread::hardware_concurrency());
    return caf::none;
  }
  for (const auto& n : t.nodes) {
    auto spawner = connect_node(sys, n.host, n.port, n.name, t.runtime.tls, timeout_);
    if (!spawner)
      return make_error(errc::node_unreachable,
                        (n.where.empty() ? t.file : n.where) + ": node '" + n.name + "' at " +
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
  connect_peers(t);
  return caf::none;
}

void job_nodes::connect_peers(const topology& t) {
  if (t.runtime.tls.enabled())
    return;
  for (size_t i = 0; i < t.nodes.size(); ++i)
    for (size_t j = i + 1; j < t.nodes.size(); ++j) {
      const auto& from = t.nodes[i];
      const auto& to = t.nodes[j];
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

void job_nodes::collect_reports(const topology& t, std::vector<messages::node_report>& into) {
  if (t.embedded()) {
    into.push_back(current_node_report("embedded"));
    return;
  }
  for (const auto& n : t.nodes) {
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
  if (embedded_spawner_)
    self_->send_exit(embedded_spawner_, caf::exit_reason::kill);
  embedded_spawner_ = nullptr;
}

} // namespace runtime
} // namespace baton::actors

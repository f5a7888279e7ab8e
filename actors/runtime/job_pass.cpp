#include "actors/runtime/job_pass.hpp"

#include <algorithm>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/flow/protocols.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

caf::error job_pass::spawn(const caf::actor& spawner, const std::string& node,
                           const planned_actor& a, std::string settings) {
  auto where = node.empty() ? std::string{"embedded"} : node;
  caf::error failure;
  messages::spawn_request request{a.role, a.name, std::move(settings), {}};
  self_->request(spawner, start_timeout_, std::move(request))
    .receive(
      [&](caf::actor& handle) {
        self_->monitor(handle);
        actors_.push_back({a.name, a.role, where, handle});
      },
      [&](caf::error& err) {
        // A node refusing bad input (a dataset it cannot read, a path
        // outside its roots) is bad input of the run: exit code 2.
        bool bad_input = err.category() == error_category_atom &&
                         (err == errc::bad_file || err == errc::bad_config);
        auto why = err == caf::sec::request_timeout
                     ? "no answer within runtime.start_timeout_ms (" +
                         std::to_string(start_timeout_.count()) +
                         " ms; a source reads its whole dataset as it starts: raise it for a "
                         "large dataset or a loaded host)"
                     : describe(err);
        failure = make_error(bad_input ? static_cast<errc>(err.code()) : errc::actor_failed,
                             "cannot start " + a.role + " '" + a.name + "' on node '" + where +
                               "': " + why);
      });
  return failure;
}

caf::error job_pass::ask(const caf::actor& target, caf::message msg, const std::string& what) {
  caf::error failure;
  self_->request(target, timeout_, std::move(msg))
    .receive([](caf::ok_atom) {},
             [&](caf::error& err) {
               failure = make_error(errc::actor_failed, what + ": " + describe(err));
             });
  return failure;
}

caf::error job_pass::wire(const job_plan& plan) {
  auto me = caf::actor_cast<caf::actor>(self_);
  for (auto& a : actors_)
    if (auto err = ask(a.handle, caf::make_message(observe_atom::value, me),
                       "cannot reach " + a.name))
      return err;
  for (const auto& e : plan.edges) {
    const auto* from = find(e.from);
    const auto* to = find(e.to);
    if (from == nullptr || to == nullptr)
      return make_error(errc::bad_config, "the plan has an edge " + e.from + " -> " + e.to +
                                            " between actors it does not have");
    auto msg = e.kind == planned_edge::kind_t::data
                 ? caf::make_message(connect_atom::value, to->handle, to->name)
                 : caf::make_message(group_atom::value, to->handle, e.index);
    if (auto err = ask(from->handle, std::move(msg),
                       "cannot connect " + from->name + " to " + to->name))
      return err;
  }
  return caf::none;
}

caf::error job_pass::arm(const std::vector<fault_spec>& edge_faults) {
  for (const auto& f : edge_faults) {
    const auto* from = find(f.from);
    if (from == nullptr)
      return make_error(errc::bad_config, f.where + ": no actor '" + f.from + "'");
    int64_t value = f.kind == "delay" ? f.delay.count() : f.at_step;
    if (auto err = ask(from->handle, caf::make_message(fault_atom::value, f.kind, f.to, value),
                       f.where + ": cannot set fault " + f.kind))
      return err;
  }
  return caf::none;
}

void job_pass::start(const job_plan& plan) {
  for (const auto& a : plan.actors)
    if (a.starts)
      self_->send(find(a.name)->handle, start_atom::value);
}

placed_actor* job_pass::find(const caf::actor_addr& addr) {
  for (auto& a : actors_)
    if (a.handle.address() == addr)
      return &a;
  return nullptr;
}

std::vector<live_actor> job_pass::unfinished_actors(const job_plan& plan) {
  std::vector<live_actor> actors;
  for (const auto& planned : plan.actors)
    if (const auto* a = find(planned.name); a != nullptr && !a->done)
      actors.push_back({a->name, a->node});
  return actors;
}

void job_pass::heard(liveness& live, const std::string& actor, int64_t step, int64_t work,
                     const std::string& waiting) {
  const auto* a = find(caf::actor_cast<caf::actor_addr>(self_->current_sender()));
  if (a != nullptr && a->name == actor)
    live.heard(actor, a->node, step, work, waiting, std::chrono::steady_clock::now());
}

void job_pass::ask_heartbeats(const std::vector<live_actor>& actors, liveness& live) {
  using clock_type = std::chrono::steady_clock;
  live.asking(clock_type::now());
  for (const auto& a : actors)
    self_->send(find(a.name)->handle, heartbeat_atom::value);
  auto deadline = clock_type::now() + std::chrono::seconds(1);
  bool timed_out = false;
  while (!timed_out && !live.all_answered(actors)) {
    auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    self_->receive(
      [&](heartbeat_atom, std::string& actor, int64_t step, int64_t work,
          std::string& waiting) { heard(live, actor, step, work, waiting); },
      caf::after(std::max(left, std::chrono::milliseconds(1))) >> [&] { timed_out = true; });
  }
}

placed_actor* job_pass::find(const std::string& name) {
  for (auto& a : actors_)
    if (a.name == name)
      return &a;
  return nullptr;
}

std::map<std::string, size_t> job_pass::actors_on() const {
  std::map<std::string, size_t> on;
  for (const auto& a : actors_)
    on[a.node] += 1;
  return on;
}

size_t job_pass::unfinished() const {
  size_t n = 0;
  for (const auto& a : actors_)
    n += a.done ? 0 : 1;
  return n;
}

void job_pass::tell_started(const job_plan& plan, const caf::message& msg) {
  for (const auto& p : plan.actors)
    if (auto* a = find(p.name); p.starts && a != nullptr && !a->done)
      self_->send(a->handle, msg);
}

std::vector<std::string> job_pass::give_up_unfinished() {
  std::vector<std::string> names;
  for (auto& a : actors_)
    if (!a.done) {
      names.push_back(a.name);
      a.done = true;
    }
  return names;
}

void job_pass::stop(std::chrono::steady_clock::duration wait,
                    const std::function<void(const caf::down_msg&)>& on_down) {
  std::set<caf::actor_addr> alive;
  for (auto& a : actors_) {
    alive.insert(a.handle.address());
    // Not exit_reason::kill: that one also ends the spawner linked to it.
    self_->send_exit(a.handle, caf::exit_reason::user_shutdown);
  }
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (!alive.empty() && std::chrono::steady_clock::now() < deadline) {
    self_->receive(
      [&](caf::down_msg& msg) {
        alive.erase(msg.source);
        on_down(msg);
      },
      [&](caf::message&) {}, // reports of the stopped pass
      caf::after(std::chrono::milliseconds(100)) >> [] {});
  }
  if (!alive.empty())
    spdlog::warn("{} actors of the failed pass did not confirm their end", alive.size());
  actors_.clear();
}

void job_pass::shutdown() {
  for (auto& a : actors_)
    self_->send_exit(a.handle, caf::exit_reason::user_shutdown);
  actors_.clear();
}

} // namespace runtime
} // namespace baton::actors

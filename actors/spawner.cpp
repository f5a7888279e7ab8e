#include "actors/spawner.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/head.hpp"
#include "actors/interfaces.hpp"
#include "actors/pipeline_stage.hpp"
#include "actors/role_spec.hpp"
#include "actors/source.hpp"
#include "actors/stage.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {

const std::vector<std::string>& registered_roles() {
  static const std::vector<std::string> roles{"source", "stage", "head", "pipeline_stage"};
  return roles;
}

caf::expected<caf::actor> spawn_role(caf::actor_system& sys, const std::string& node,
                                     const messages::spawn_request& req) {
  if (req.invalid)
    return make_error(errc::malformed_message, "spawn request: " + describe(req.invalid));
  if (req.role == "source") {
    auto spec = parse_source_spec(req.spec);
    return spec ? spawn_source(sys, req.name, node, *spec) : spec.error();
  }
  if (req.role == "stage") {
    auto spec = parse_stage_spec(req.spec);
    return spec ? spawn_stage(sys, req.name, node, *spec) : spec.error();
  }
  if (req.role == "head") {
    auto spec = parse_head_spec(req.spec);
    return spec ? spawn_head(sys, req.name, node, *spec) : spec.error();
  }
  if (req.role == "pipeline_stage") {
    auto spec = parse_pipeline_stage_spec(req.spec);
    return spec ? spawn_pipeline_stage(sys, req.name, node, *spec) : spec.error();
  }
  return make_error(errc::unknown_actor_type,
                    "node " + node + " has no actor type '" + req.role +
                      "' (registered: source, stage, head, pipeline_stage)");
}

messages::node_report current_node_report(const std::string& node) {
  messages::node_report r;
  r.name = node;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux: KiB
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  r.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  r.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  r.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return r;
}

namespace {

struct spawner_state {
  std::string node;
  static inline const char* name = "spawner";
};

caf::behavior spawner_behavior(caf::stateful_actor<spawner_state>* self, std::string node) {
  self->state.node = std::move(node);
  // Children that end (normally or not) must not take the spawner down.
  self->set_exit_handler([=](const caf::exit_msg& msg) {
    if (msg.source == nullptr || msg.reason == caf::exit_reason::kill)
      self->quit(msg.reason);
  });
  return {
    [=](const messages::spawn_request& req) -> caf::result<caf::actor> {
      auto& node = self->state.node;
      auto started = spawn_role(self->system(), node, req);
      if (!started) {
        spdlog::warn("node {}: refused to spawn {} '{}': {}", node, req.role, req.name,
                     describe(started.error()));
        return started.error();
      }
      self->link_to(*started);
      spdlog::info("node {}: spawned {} '{}'", node, req.role, req.name);
      return *started;
    },
    [=](caf::get_atom, node_atom) { return current_node_report(self->state.node); },
  };
}

} // namespace

caf::actor spawn_spawner(caf::actor_system& sys, const std::string& node) {
  return sys.spawn<caf::detached>(spawner_behavior, node);
}

} // namespace baton::actors

// The run request's topology: the file (or the built-in default) read once
// and parsed once with every mode's schema, or with --resume DIR the run
// recorded there. Config's parsers take the schemas; no plan is made here
// (plan_of makes the one plan of a run).
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/config/default_topology.hpp"
#include "actors/config/topology_file.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

/// The built-in default keeps its checkpoint where configs/transfer.yaml does.
std::vector<std::string> with_default_checkpoint(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"backbone.checkpoint=" BATON_SOURCE_DIR
                               "/build/checkpoints/convnet-pretrained.pt"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

/// The topology of `record`: the text it was started with, its overrides.
caf::expected<topology> load_recorded(const run_record& record) {
  const auto& jobs = all_job_schemas();
  if (record.topology_file.empty())
    return parse_topology(record.topology_text, default_topology_name,
                          with_default_checkpoint(record.overrides), jobs);
  return parse_topology_as(record.topology_text, record.topology_file, record.overrides, jobs);
}

/// The text of the request's topology file, or the built-in default's: read
/// here once, then parsed from this text.
caf::expected<std::string> request_text(const run_request& r) {
  if (r.topology_path.empty())
    return std::string{default_topology_yaml};
  return read_topology_file(r.topology_path);
}

/// `--resume DIR`: the recorded run's topology and options (request_record);
/// its training settings must be those of the recorded run.
caf::expected<topology> load_resumed_topology(const run_request& r) {
  const auto& jobs = all_job_schemas();
  if (!has_run_record(r.resume_dir)) {
    spdlog::warn("--resume {}: no {} (checkpoints of an older baton): the topology and --set "
                 "options must be those of the run that wrote them",
                 r.resume_dir, run_record_path(r.resume_dir));
    run_request as_given = r;
    as_given.resume_dir.clear();
    return load_request_topology(as_given);
  }
  auto then = read_run_record(r.resume_dir);
  auto text = request_text(r);
  if (!text)
    return text.error();
  auto now = request_record(r, *text);
  if (!then)
    return then.error();
  if (!now)
    return now.error();
  auto name = [](const run_record& x) {
    return x.topology_file.empty() ? std::string{default_topology_name} : x.topology_file;
  };
  auto then_values = topology_values(then->topology_text, name(*then), then->overrides, jobs);
  if (!then_values)
    return then_values.error();
  auto now_values = topology_values(now->topology_text, name(*now), now->overrides, jobs);
  if (!now_values)
    return now_values.error();
  auto difference = settings_difference(training_settings(*then_values),
                                        training_settings(*now_values));
  if (!difference.empty())
    return make_error(errc::bad_config,
                      "--resume " + r.resume_dir + ": the checkpoints were trained with other "
                      "settings (" + difference + "); a resumed run may change runtime, "
                      "faults, nodes and placement only (the run's settings are in " +
                      run_record_path(r.resume_dir) + ")");
  return load_recorded(*now);
}

} // namespace

caf::expected<topology> load_request_topology(const run_request& r) {
  const auto& jobs = all_job_schemas();
  if (!r.resume_dir.empty())
    return load_resumed_topology(r);
  if (!r.topology_path.empty())
    return load_topology(r.topology_path, r.overrides, jobs);
  return parse_topology(default_topology_yaml, default_topology_name,
                        with_default_checkpoint(r.overrides), jobs);
}

} // namespace modes
} // namespace baton::actors

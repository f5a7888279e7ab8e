#pragma once

// The small data-parallel job the suites of job: data-parallel write their
// sections into, and the settings its plan gives a worker.

#include <cstddef>
#include <string>

#include <gtest/gtest.h>

#include "actors/modes/data_parallel/worker.hpp"
#include "messages/errc.hpp"
#include "tests/support/topology_fixture.hpp"

namespace baton::testing {

/// A data-parallel job on synthetic data (see small_job_topology) read as
/// `file`: line 6 is `backbone:` with `checkpoint` (none: no pre-trained
/// backbone), line 11 `data_parallel:`, line 12 `model: MODEL` when `model`
/// is given (the section's first key otherwise), the section's keys follow.
inline topology_fixture data_parallel_topology(const std::string& file,
                                               const std::string& model = "",
                                               const std::string& checkpoint = "none") {
  // backbone.model is the model trained when data_parallel.model is not
  // given; another model beside it would be refused (one model, named once).
  const std::string backbone_model =
    model.empty() || model == "convnet" ? "model: convnet, " : "";
  const std::string backbone =
    "{" + backbone_model + "checkpoint: " + checkpoint + ",\n"
    "           pretrain: {task: all10, optimizer: {lr: 0.05, momentum: 0.9}}}";
  const std::string model_key = model.empty() ? "" : "  model: " + model + "\n";
  return {file, small_job_topology("data-parallel", "data_parallel", backbone) + model_key};
}

/// The settings of the last of the `workers` workers of the plan of `rest`,
/// read through their codec, which must write them back as planned; a test
/// failure and default settings when the plan has another number of actors
/// or the codec refuses them.
inline actors::data_parallel::worker_settings last_planned_worker(const topology_fixture& job,
                                                             const std::string& rest,
                                                             size_t workers) {
  auto plan = job.plan_for(rest);
  if (plan.actors.size() != workers) {
    ADD_FAILURE() << "not " << workers << " workers";
    return {};
  }
  const auto& settings = plan.actors.back().settings;
  auto spec = actors::data_parallel::parse_worker_settings(settings);
  if (!spec) {
    ADD_FAILURE() << describe(spec.error());
    return {};
  }
  EXPECT_EQ(actors::data_parallel::to_yaml(*spec), settings);
  return *spec;
}

} // namespace baton::testing

#include "tests/support/topology_fixture.hpp"

#include <gtest/gtest.h>

#include "actors/modes/job_schemas.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"

namespace baton::testing {

const char* const small_synthetic_data =
  "{dataset: synthetic, synthetic_train: 192, synthetic_test: 64,\n"
  "       batch_size: 16, epochs: 1}";

const char* const small_transfer_end = R"(backbone: {model: convnet, checkpoint: "", split: [pool1]}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: all10, task: all10}
)";

std::string small_job_topology(const std::string& job, const std::string& section,
                               const std::string& backbone, const std::string& data) {
  return "# a small " + job + " test topology\n"
         "job: " + job + "\n"
         "seed: 7\n"
         "data: " + data + "\n"
         "backbone: " + backbone + "\n"
         "tasks:\n"
         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
         "heads: [{name: all10, task: all10}]\n" +
         section + ":\n";
}

topology_fixture::topology_fixture(std::string file, std::string head)
  : file_(std::move(file)), head_(std::move(head)) {}

std::string topology_fixture::text(const std::string& rest) const {
  return head_ + rest;
}

caf::expected<actors::topology> topology_fixture::parse(const std::string& rest) const {
  return parse_text(text(rest));
}

caf::expected<actors::topology> topology_fixture::parse_text(const std::string& yaml) const {
  return actors::parse_topology(yaml, file_, {});
}

std::string topology_fixture::refusal(const std::string& rest) const {
  auto t = parse(rest);
  if (t) {
    ADD_FAILURE() << "accepted:\n" << rest;
    return "";
  }
  return describe(t.error());
}

actors::job_plan topology_fixture::plan_for(const std::string& rest,
                                            int32_t local_nodes) const {
  return plan_or_fail(parse(rest), local_nodes);
}

actors::job_plan plan_or_fail(const caf::expected<actors::topology>& t, int32_t local_nodes) {
  if (!t) {
    ADD_FAILURE() << describe(t.error());
    return {};
  }
  auto plan = actors::plan_of(local_nodes > 0 ? actors::with_local_nodes(*t, local_nodes) : *t);
  if (!plan) {
    ADD_FAILURE() << describe(plan.error());
    return {};
  }
  return *plan;
}

} // namespace baton::testing

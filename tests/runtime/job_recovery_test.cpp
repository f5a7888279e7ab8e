#include "actors/runtime/job_recovery.hpp"

#include <gtest/gtest.h>

#include "actors/runtime/recovery_rules.hpp"
#include "messages/errc.hpp"
#include "tests/support/moments.hpp"

using namespace baton::actors;
using baton::describe;
using baton::errc;
using baton::testing::moment;
using namespace std::chrono_literals;

namespace {

cluster recovering_cluster(int32_t max_restarts, std::vector<fault_spec> faults = {}) {
  cluster c;
  c.runtime.checkpoint_every = 4;
  c.runtime.max_restarts = max_restarts;
  c.faults = std::move(faults);
  return c;
}

fault_spec kill_node(std::string node, int64_t step) {
  fault_spec f;
  f.kind = "kill_node";
  f.node = std::move(node);
  f.at_step = step;
  return f;
}

} // namespace

TEST(job_recovery, a_failure_is_recoverable_only_where_the_topology_recovers) {
  job_recovery recovers{recovering_cluster(2)};
  recovers.failed("actor_failed", "stage1", make_error(errc::actor_failed, "boom"));
  EXPECT_TRUE(recovers.recoverable());
  recovers.pass_started();
  EXPECT_FALSE(recovers.recoverable());

  job_recovery never{cluster{}}; // no checkpoints, no faults
  never.failed("actor_failed", "stage1", make_error(errc::actor_failed, "boom"));
  EXPECT_FALSE(never.recoverable());
}

TEST(job_recovery, an_error_that_recurs_at_the_same_step_is_not_retried) {
  job_recovery r{recovering_cluster(5)};
  liveness live;
  live.start(moment(0));
  live.heard("stage1", "n1", 7, 1, "", moment(10));
  auto failure = make_error(errc::compute_failed, "stage1: bad shape");
  r.failed("actor_failed", "stage1", failure);
  EXPECT_FALSE(r.restart_refused(failure, live, 0)); // first time at step 7
  r.failed("actor_failed", "stage1", failure);
  auto refused = r.restart_refused(failure, live, 1);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused.code(), static_cast<uint8_t>(errc::compute_failed));
  EXPECT_NE(describe(refused).find("recurred at step 7"), std::string::npos) << describe(refused);
}

TEST(job_recovery, restarts_end_at_max_restarts) {
  job_recovery r{recovering_cluster(2)};
  liveness live;
  auto failure = make_error(errc::node_unreachable, "lost node 'n1'");
  r.failed("node_lost", "n1", failure);
  EXPECT_FALSE(r.restart_refused(failure, live, 1));
  auto refused = r.restart_refused(failure, live, 2);
  ASSERT_TRUE(refused);
  EXPECT_NE(describe(refused).find("gave up after 2 restarts"), std::string::npos);
}

TEST(job_recovery, the_record_of_a_lost_node_runs_from_its_last_heartbeat_to_training_again) {
  job_recovery r{recovering_cluster(2)};
  liveness live;
  live.start(moment(0));
  live.reported("n1", moment(1000));
  EXPECT_FALSE(r.resumed(moment(1100))); // a first pass recovered from nothing
  r.failed("node_lost", "n1", make_error(errc::node_unreachable, "lost"));
  r.restart_from(8, live, moment(4000));
  EXPECT_EQ(r.checkpoints().restore_step, 8);
  auto record = r.resumed(moment(6500));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->kind, "node_lost");
  EXPECT_EQ(record->target, "n1");
  EXPECT_EQ(record->restored_step, 8);
  EXPECT_EQ(record->detected_after_ms, 3000);
  EXPECT_EQ(record->recovered_after_ms, 2500);
  EXPECT_FALSE(r.resumed(moment(7000))); // once
}

TEST(job_recovery, faults_past_the_end_are_warned_about_once) {
  job_recovery r{recovering_cluster(1, {kill_node("n1", 1000)})};
  auto warnings = r.unreachable_faults(640, 1, 64); // 10 steps
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(r.unreachable_faults(640, 1, 64).empty());
}

TEST(recovery_rules, an_unknown_failure_code_reads_as_actor_failed) {
  EXPECT_EQ(failure_code(0), errc::actor_failed);
  EXPECT_EQ(failure_code(255), errc::actor_failed);
  EXPECT_EQ(failure_code(static_cast<uint8_t>(errc::bad_file)), errc::bad_file);
}

TEST(recovery_rules, the_hint_says_which_setting_keeps_a_run_alive) {
  runtime_spec r;
  r.max_restarts = 0;
  EXPECT_NE(no_recovery_hint(r).find("runtime.max_restarts is 0"), std::string::npos);
  r.max_restarts = 3;
  r.checkpoint_every = 0;
  EXPECT_NE(no_recovery_hint(r).find("runtime.checkpoint_every: N"), std::string::npos);
}

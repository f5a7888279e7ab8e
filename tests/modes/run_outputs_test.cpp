// What a finished run tells of its results (actors/modes/run_outputs.cpp):
// a result whose training loss never left the uniform answer learned
// nothing, and the run says so (the rows of `baton bench freezing --quick`
// fine-tuned from a collapsed checkpoint ended at 10.2% without a word).

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "actors/modes/run_outputs.hpp"
#include "model/core/specs.hpp"

using namespace baton::actors;

TEST(run_outputs, a_result_whose_loss_stayed_at_ln_c_is_told_it_learned_nothing) {
  topology t;
  t.tasks = {baton::model::make_task("all10", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}),
             baton::model::make_task("footwear", {0, 0, 0, 0, 0, 1, 0, 1, 0, 1})};
  baton::messages::actor_report stuck;
  stuck.actor = "workers";
  stuck.task = "all10";
  stuck.train_loss = 2.3020; // ln 10 = 2.3026
  stuck.epochs.resize(2);
  auto learned = stuck;
  learned.actor = "footwear";
  learned.task = "footwear";
  learned.train_loss = 0.05;
  job_result r;
  r.heads = {stuck, learned};

  auto warnings = untrained_results(t, r);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("'workers' learned nothing", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("ln 10 = 2.3026"), std::string::npos) << warnings[0];

  r.heads[0].train_loss = 2.25; // it moved: learning, if slowly
  EXPECT_TRUE(untrained_results(t, r).empty());
  r.heads[0].train_loss = 0.7; // footwear's ln 2 = 0.693 is all10's good loss
  r.heads[1].train_loss = 0.7;
  ASSERT_EQ(untrained_results(t, r).size(), 1u);
  EXPECT_EQ(untrained_results(t, r)[0].rfind("'footwear'", 0), 0u);
  // A loss that is not finite is divergence's (told apart), and a result
  // without an epoch has nothing to judge.
  r.heads[1].train_loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(untrained_results(t, r).empty());
  r.heads[1].train_loss = 3.0;
  r.heads[1].epochs.clear();
  EXPECT_TRUE(untrained_results(t, r).empty());
}

#include "model/cost/simulated_plans.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "model/cost/projection.hpp"

using namespace baton::model::cost;

namespace {

constexpr double plan_tolerance = 1e-9;

/// Two layers of equal cost at one sample, so that a 2-stage pipeline is
/// balanced: forward 1 s, backward 2 s, update 0.5 s, 100 B of activation
/// and 1000 B of parameters each.
workload balanced(int64_t batch_size = 1) {
  workload w;
  w.layers = {{"a", 1, 2, 0.5, 100, 1000}, {"b", 1, 2, 0.5, 100, 1000}};
  w.profiled_batch = 1;
  w.batch_size = batch_size;
  return w;
}

cluster plan_hosts(int32_t count, double bandwidth = 1000, double latency = 0) {
  return cluster{count, link_model{bandwidth, latency, 0}};
}

/// The simulated and the formula's step of `s`, with no runtime costs.
void expect_formula(const workload& w, const cluster& c, const strategy& s) {
  const double simulated = simulate_prediction(w, c, s, runtime_costs{}).step_seconds;
  EXPECT_NEAR(simulated, predict(w, c, s).step_seconds, plan_tolerance) << name_of(s);
}

} // namespace

TEST(simulated_plans, local_is_its_compute) {
  expect_formula(balanced(4), plan_hosts(1), local_strategy{});
  expect_formula(balanced(4), plan_hosts(1), local_strategy{{}, 3, 2, 0.25}); // a timed step end
}

TEST(simulated_plans, agree_with_the_formulas_where_these_are_exact) {
  // Formulas and simulation model the same schedule in these cases: one
  // bucket (ready when the backward ends), shards one per host, balanced stages.
  for (int32_t w : {2, 3, 4}) {
    expect_formula(balanced(), plan_hosts(w, 1000, 0.01), ring_strategy{{}, 1, true});
    expect_formula(balanced(), plan_hosts(w, 1000, 0.01), ring_strategy{{}, 1, false});
    expect_formula(balanced(), plan_hosts(w, 1000, 0.01), local_sgd_strategy{{}, 4, 1});
    expect_formula(balanced(), plan_hosts(w, 1000, 0.01), ps_strategy{{}, 0});
    ist_strategy ist;
    ist.local_steps = 5;
    expect_formula(balanced(), plan_hosts(w, 1000, 0.01), ist);
  }
  pipeline_strategy gpipe;
  gpipe.stage_ends = {1, 2};
  gpipe.microbatches = 4;
  gpipe.schedule = pipeline_schedule::gpipe;
  expect_formula(balanced(4), plan_hosts(2, 1e12), gpipe);
}

TEST(simulated_plans, agree_with_the_formulas_on_a_link_with_a_burst) {
  // Without latency the ring's rounds follow each other with no idle link between them,
  // and two hosts' exchanges are one message each way: the buckets credit what the
  // formulas credit. A burst of 300 B is less than one exchange, 5000 B more than all.
  for (double burst : {300.0, 5000.0}) {
    for (int32_t w : {2, 3, 4}) {
      cluster c = plan_hosts(w);
      c.link.burst = burst;
      expect_formula(balanced(), c, ring_strategy{{}, 1, true});
      expect_formula(balanced(), c, local_sgd_strategy{{}, 4, 1});
    }
    cluster two = plan_hosts(2);
    two.link.burst = burst;
    expect_formula(balanced(), two, ps_strategy{{}, 0});
    // Three hosts: each worker's first push goes to another shard, as the
    // kernel sends a step's pushes side by side (not all to shard 0 first).
    cluster three = plan_hosts(3);
    three.link.burst = burst;
    expect_formula(balanced(), three, ps_strategy{{}, 0});
    ist_strategy ist;
    ist.local_steps = 5;
    expect_formula(balanced(), two, ist);
  }
}

TEST(simulated_plans, ist_s_round_work_is_on_its_path_as_the_formula_has_it) {
  // A link that carries the slices in no time: a round is the shard's partition, its W
  // pieces taken one after the other (the last worker's last), the worker's assembly,
  // L steps and cut, and the pieces written back one after the other as they come: the
  // last after W takes and a put, or (puts longer than takes) after a take and W puts.
  for (int32_t w : {2, 3}) {
    ist_strategy ist;
    ist.local_steps = 4;
    ist.subnet_workers = w;
    ist.subnet_step_seconds = 1;
    ist.round = {0.2, 0.3, 0.1, 0.05, 0.07};
    ist.timed_shards = w;
    expect_formula(balanced(), plan_hosts(w, 1e15), ist);
    const double round = 0.1 + std::max(w * 0.05 + 0.07, 0.05 + w * 0.07) + 0.2 + 4 + 0.3;
    EXPECT_NEAR(simulate_prediction(balanced(), plan_hosts(w, 1e15), ist, runtime_costs{})
                  .step_seconds,
                round / 4, 1e-6)
      << "W=" << w;
  }
}

TEST(simulated_plans, a_pipeline_fills_once_under_1f1b) {
  // 1f1b steps after every microbatch and never flushes: one microbatch
  // every t = f + b + u per stage, no bubble in the steady state.
  pipeline_strategy p;
  p.stage_ends = {1, 2};
  p.microbatches = 2;
  p.schedule = pipeline_schedule::one_f_one_b;
  const auto sim = simulate_prediction(balanced(2), plan_hosts(2, 1e12), p, runtime_costs{});
  EXPECT_NEAR(sim.step_seconds, 2 * 3.5, plan_tolerance);
  // 1f1b-flush: the bubble of gpipe, one step per minibatch.
  p.schedule = pipeline_schedule::one_f_one_b_flush;
  const auto flush = simulate_prediction(balanced(2), plan_hosts(2, 1e12), p, runtime_costs{});
  EXPECT_NEAR(flush.step_seconds, (2 + 1) * 3.0 + 0.5, plan_tolerance);
}

TEST(simulated_plans, a_1f1b_step_on_shared_cores_holds_a_step_s_work) {
  // Three stages on one core, a link of no cost: the core never idles, and a
  // step is the whole step's work, 3 stages x 2 microbatches x 3.5 s. (The
  // drain at the end, where the first stages had run their forwards ahead, was
  // counted in until 2026-12-03: 18 s here, 7.5 of 10.5 with one microbatch.)
  workload w = balanced(2);
  w.layers.push_back({"c", 1, 2, 0.5, 100, 1000});
  pipeline_strategy p;
  p.stage_ends = {1, 2, 3};
  p.microbatches = 2;
  p.schedule = pipeline_schedule::one_f_one_b;
  cluster c = plan_hosts(3, 1e15);
  c.shared_cores = 1;
  EXPECT_NEAR(simulate_prediction(w, c, p, runtime_costs{}).step_seconds, 21, 1e-6);
  p.microbatches = 1;
  w.batch_size = 1;
  EXPECT_NEAR(simulate_prediction(w, c, p, runtime_costs{}).step_seconds, 10.5, 1e-6);
}

TEST(simulated_plans, a_pipeline_s_bytes_are_a_step_s_messages_under_every_schedule) {
  // Each microbatch's activation forward and its gradient back on every cut,
  // whatever the schedule: 1f1b's stages send a step ahead of each other,
  // which a sender's own measured steps would miss (they held 10 of 12).
  for (auto schedule : {pipeline_schedule::gpipe, pipeline_schedule::one_f_one_b_flush,
                        pipeline_schedule::one_f_one_b})
    for (int32_t stages : {2, 3}) {
      workload w = balanced(4);
      w.layers.push_back({"c", 1, 2, 0.5, 100, 1000});
      pipeline_strategy p;
      p.stage_ends = stages == 2 ? std::vector<size_t>{2, 3} : std::vector<size_t>{1, 2, 3};
      p.microbatches = 2;
      p.schedule = schedule;
      const auto sim = simulate_prediction(w, plan_hosts(stages, 1e12), p, runtime_costs{});
      EXPECT_NEAR(sim.wire_bytes, 2.0 * (stages - 1) * 4 * 100, plan_tolerance)
        << name_of(p) << ", " << stages << " stages";
      EXPECT_NEAR(sim.wire_bytes, predict(w, plan_hosts(stages, 1e12), p).wire_bytes,
                  plan_tolerance)
        << name_of(p);
    }
}

TEST(simulated_plans, gpipe_s_last_stage_sends_each_gradient_back_at_once) {
  // Two microbatches of one sample (f 1 s, b 2 s, u 0.5 s per stage), 100 B
  // of activation over a link of 10 B/s: 10 s a message, a connection's in
  // order. Stage 0 forwards at 0-2, its activations arrive at 11 and 21;
  // the last stage takes each one's forward and backward in one go (14,
  // 24) and sends its gradient back while the next activation comes in
  // (they arrive at 24 and 34); stage 0's backwards 24-26 and 34-36, its
  // update 36-36.5. (With the last stage's forwards first, its gradients
  // left after 22 and the step took 10 s more.)
  const pipeline_strategy gpipe{{1, 2}, {}, 2, pipeline_schedule::gpipe};
  const auto sim = simulate_prediction(balanced(2), plan_hosts(2, 10), gpipe, runtime_costs{});
  EXPECT_NEAR(sim.step_seconds, 36.5, plan_tolerance);
}

TEST(simulated_plans, a_weight_half_handed_on_runs_while_the_stage_before_computes) {
  // Stage 0 ends in a layer whose backward of 4 s is half weight gradient:
  // f 2, b 6, u 1 against stage 1's 1, 2, 0.5. With weight_gradient: next
  // stage 1 computes those 2 s after it has sent the input gradient back,
  // while stage 0 runs its backward (4 s now), whose step waits for them:
  // the step is stage 0's work, 7 s a microbatch instead of 9.
  workload w = balanced(2);
  w.layers[1].backward_seconds = 4;
  w.layers[1].weight_gradient_seconds = 2;
  w.layers.push_back({"c", 1, 2, 0.5, 100, 1000});
  pipeline_strategy p;
  p.stage_ends = {2, 3};
  p.microbatches = 2;
  p.schedule = pipeline_schedule::one_f_one_b;
  const auto here = simulate_prediction(w, plan_hosts(2, 1e12), p, runtime_costs{});
  EXPECT_NEAR(here.step_seconds, 2 * 9.0, 1e-6);
  p.weight_gradient_next = {true, false};
  const auto next = simulate_prediction(w, plan_hosts(2, 1e12), p, runtime_costs{});
  EXPECT_NEAR(next.step_seconds, 2 * 7.0, 1e-6);
  // The formula agrees: the moved seconds leave stage 0 and join stage 1.
  EXPECT_NEAR(predict(w, plan_hosts(2, 1e12), p).step_seconds, next.step_seconds, 1e-6);
  // The layer's input crosses beside its output, the weight gradient back.
  EXPECT_NEAR(next.wire_bytes - here.wire_bytes, 2 * (100.0 + 1000), 1e-6);
}

TEST(simulated_plans, replicated_stages_take_every_other_microbatch) {
  // Stage 0 on two replicas, stage 1 on one: the plan runs without deadlock
  // under every schedule and is never faster than stage 1 alone.
  for (auto schedule : {pipeline_schedule::gpipe, pipeline_schedule::one_f_one_b_flush,
                        pipeline_schedule::one_f_one_b}) {
    pipeline_strategy p;
    p.stage_ends = {1, 2};
    p.replicas = {2, 1};
    p.microbatches = 4;
    p.schedule = schedule;
    const auto sim = simulate_prediction(balanced(4), plan_hosts(3, 1e12), p, runtime_costs{});
    EXPECT_GE(sim.step_seconds, 4 * 3.0 - plan_tolerance) << name_of(p);
  }
}

TEST(simulated_plans, emulated_hosts_share_the_machines_cores) {
  // Two workers of a ring on one core: their compute takes turns.
  cluster c = plan_hosts(2, 1e12);
  c.shared_cores = 1;
  const auto sim = simulate_prediction(balanced(), c, ring_strategy{{}, 1, true}, runtime_costs{});
  EXPECT_NEAR(sim.step_seconds, 2 * (2 + 4 + 1), 1e-6);
  c.shared_cores = 2;
  expect_formula(balanced(), c, ring_strategy{{}, 1, true});
}

TEST(simulated_plans, the_runtime_costs_lengthen_the_step) {
  runtime_costs rt;
  rt.message_seconds = 1e-3;
  rt.remote_message_seconds = 1e-4;
  rt.byte_seconds = 1e-6;
  const auto with = simulate_prediction(balanced(), plan_hosts(2), ring_strategy{{}, 1, true}, rt);
  const auto without =
    simulate_prediction(balanced(), plan_hosts(2), ring_strategy{{}, 1, true}, runtime_costs{});
  EXPECT_GT(with.step_seconds, without.step_seconds);
  EXPECT_NEAR(with.wire_bytes, without.wire_bytes, plan_tolerance);
}

TEST(simulated_plans, projections_and_crossovers_by_simulation_follow_the_plans) {
  // local against the ring with one bucket, whose simulated steps are the formulas' (above):
  // the crossovers found between the simulated strategies are the formulas', each along
  // the bandwidth within the simulation's 1%, and every projected point is the
  // simulation of the plan at that many hosts.
  const std::vector<strategy> pair{local_strategy{}, ring_strategy{{}, 1, true}};
  const std::vector<int32_t> hosts{2, 3, 4};
  const std::vector<double> rates{100, 250, 1000};
  const link_model link{1000, 0.01, 0};
  const auto simulated = crossovers(balanced(), pair, link, hosts, rates, by_simulation());
  const auto formula = crossovers(balanced(), pair, link, hosts, rates, by_formula());
  ASSERT_FALSE(formula.empty());
  ASSERT_EQ(simulated.size(), formula.size());
  for (size_t k = 0; k < formula.size(); ++k) {
    SCOPED_TRACE(formula[k].sentence());
    EXPECT_EQ(simulated[k].along, formula[k].along);
    EXPECT_EQ(simulated[k].faster_above, formula[k].faster_above);
    EXPECT_NEAR(simulated[k].at, formula[k].at, 0.01 * formula[k].at);
  }
  const auto points = project(balanced(), ring_strategy{{}, 1, true}, link, hosts, rates,
                              by_simulation());
  ASSERT_EQ(points.size(), hosts.size() * rates.size());
  for (const auto& point : points) {
    cluster c{point.hosts, link};
    c.link.bandwidth = point.bandwidth;
    const auto alone = simulate_prediction(balanced(), c, ring_strategy{{}, 1, true}, {});
    EXPECT_DOUBLE_EQ(point.predicted.step_seconds, alone.step_seconds);
  }
}

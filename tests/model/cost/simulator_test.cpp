#include "model/cost/simulator.hpp"

#include <gtest/gtest.h>

#include "model/core/error.hpp"

using namespace baton::model::cost;

namespace {

constexpr double simulator_tolerance = 1e-9;

/// `count` hosts, each on its own machine of `cores` cores.
simulated_plan on_hosts(int32_t count, int32_t cores = 1) {
  simulated_plan p;
  p.machine_cores.assign(static_cast<size_t>(count), cores);
  p.hosts.clear();
  for (int32_t h = 0; h < count; ++h)
    p.hosts.push_back({h});
  return p;
}

/// A ring all-reduce of `bytes` over one actor per host, `steps` times.
simulated_plan ring(int32_t hosts, double bytes, int32_t steps) {
  simulated_plan p = on_hosts(hosts);
  for (int32_t h = 0; h < hosts; ++h) {
    simulated_actor a{"ring" + std::to_string(h), h, true, {}};
    for (int32_t s = 0; s < steps; ++s) {
      // Two hosts send both halves, then receive both (ring_exchange.hpp).
      const bool swap = hosts == 2;
      for (int32_t round = 0; round < 2 * (hosts - 1); ++round) {
        a.program.push_back(operation::send((h + 1) % hosts, bytes / hosts));
        if (!swap)
          a.program.push_back(operation::receive((h + hosts - 1) % hosts));
      }
      for (int32_t round = 0; swap && round < 2; ++round)
        a.program.push_back(operation::receive((h + 1) % hosts));
      a.program.push_back(operation::step_end());
    }
    p.actors.push_back(a);
  }
  return p;
}

/// Stage s of a two-stage gpipe: M forwards (activation out), then M
/// backwards (gradient back), one step per minibatch.
simulated_actor gpipe_stage(int32_t stage, int32_t microbatches, double forward,
                            double backward, double bytes, int32_t steps) {
  simulated_actor a{"stage" + std::to_string(stage), stage, true, {}};
  const int32_t other = 1 - stage;
  for (int32_t s = 0; s < steps; ++s) {
    for (int32_t m = 0; m < microbatches; ++m) {
      if (stage == 1)
        a.program.push_back(operation::receive(other, time_kind::waiting));
      a.program.push_back(operation::compute(forward));
      if (stage == 0)
        a.program.push_back(operation::send(other, bytes));
    }
    for (int32_t m = 0; m < microbatches; ++m) {
      if (stage == 0)
        a.program.push_back(operation::receive(other, time_kind::waiting));
      a.program.push_back(operation::compute(backward));
      if (stage == 1)
        a.program.push_back(operation::send(other, bytes));
    }
    a.program.push_back(operation::step_end());
  }
  return a;
}

} // namespace

TEST(simulator, a_ring_with_no_compute_takes_the_ring_all_reduce) {
  // 2 (W - 1) rounds of G / W bytes, each a latency: 2 (W - 1) / W x G / B
  // + 2 (W - 1) latencies; two hosts send both halves at once: one latency.
  for (int32_t hosts : {2, 3, 4, 8}) {
    simulated_plan p = ring(hosts, 4000, 4);
    p.link = link_model{1000, 0.01, 0};
    const simulation s = simulate(p);
    const double latencies = hosts == 2 ? 1 : 2.0 * (hosts - 1);
    const double expected = 2.0 * (hosts - 1) / hosts * 4000 / 1000 + latencies * 0.01;
    EXPECT_NEAR(s.step_seconds, expected, simulator_tolerance) << hosts << " hosts";
    EXPECT_NEAR(s.step_seconds, ring_allreduce_seconds(4000, hosts, p.link), simulator_tolerance);
    EXPECT_NEAR(s.wire_bytes, 2.0 * (hosts - 1) * 4000, simulator_tolerance);
    EXPECT_NEAR(s.compute_seconds, 0, simulator_tolerance);
    EXPECT_NEAR(s.communication_seconds + s.waiting_seconds, s.step_seconds, simulator_tolerance);
  }
}

TEST(simulator, a_message_overhead_occupies_the_sender_once_per_round) {
  simulated_plan p = ring(3, 3000, 3);
  p.link = link_model{1000, 0.01, 0.2};
  // Each round: 0.2 s of the sender's work, then 1000 B at 1000 B/s, then 10 ms.
  EXPECT_NEAR(simulate(p).step_seconds, 4 * (0.2 + 1 + 0.01), simulator_tolerance);
  EXPECT_NEAR(simulate(p).step_seconds, ring_allreduce_seconds(3000, 3, p.link),
              simulator_tolerance);
}

TEST(simulator, a_two_stage_gpipe_takes_the_bubble_formula) {
  // Forward 1 s, backward 2 s per microbatch and stage, a free link:
  // (M + S - 1) (f + b) per minibatch.
  for (int32_t microbatches : {1, 2, 4, 8}) {
    simulated_plan p = on_hosts(2);
    p.link = link_model{1e12, 0, 0};
    for (int32_t stage : {0, 1})
      p.actors.push_back(gpipe_stage(stage, microbatches, 1, 2, 0, 3));
    const simulation s = simulate(p);
    EXPECT_NEAR(s.step_seconds, (microbatches + 1) * 3.0, simulator_tolerance) << microbatches;
    // Each stage computes M (f + b) and waits the bubble, (S - 1) (f + b).
    EXPECT_NEAR(s.compute_seconds, microbatches * 3.0, simulator_tolerance);
    EXPECT_NEAR(s.waiting_seconds, 3.0, simulator_tolerance);
  }
}

TEST(simulator, a_connection_sends_its_messages_in_order) {
  // Host 0 sends two messages of 100 B to host 1 (one connection: in order)
  // and one to host 2 (another connection: sharing host 0's link with the
  // first). At 100 B/s: the first to host 1 and the one to host 2 share the
  // link, 50 B/s each, until both are sent at 2 s; the second to host 1
  // then has the link alone and is sent at 3 s. Each receiver computes 1 s
  // per message it gets: host 2 ends at 3 s, host 1 at 4 s.
  simulated_plan p = on_hosts(3);
  p.link = link_model{100, 0, 0};
  p.warmup_steps = 0;
  simulated_actor sender{"sender", 0, true, {}};
  for (int32_t to : {1, 1, 2})
    sender.program.push_back(operation::send(to, 100));
  sender.program.push_back(operation::step_end());
  p.actors.push_back(sender);
  for (int32_t host : {1, 2}) {
    simulated_actor receiver{"receiver" + std::to_string(host), host, true, {}};
    for (int32_t m = 0; m < (host == 1 ? 2 : 1); ++m) {
      receiver.program.push_back(operation::receive(0));
      receiver.program.push_back(operation::compute(1));
    }
    receiver.program.push_back(operation::step_end());
    p.actors.push_back(receiver);
  }
  const simulation s = simulate(p);
  EXPECT_NEAR(s.end_seconds, 4, simulator_tolerance);
  EXPECT_NEAR(s.step_seconds, 4, simulator_tolerance);
}

TEST(simulator, a_link_carrying_two_connections_delivers_its_shared_efficiency) {
  // Host 0 sends 100 B to host 1 and 100 B to host 2 at once over a link of
  // 100 B/s that delivers half its rate while it carries two connections
  // (link_model::shared_efficiency 0.5): 25 B/s each, both sent at 4 s
  // (2 s at the rate split equally). A connection alone keeps the rate.
  for (double efficiency : {1.0, 0.5}) {
    simulated_plan p = on_hosts(3);
    p.link = link_model{100, 0, 0};
    p.link.shared_efficiency = efficiency;
    p.warmup_steps = 0;
    simulated_actor sender{"sender", 0, true, {}};
    for (int32_t to : {1, 2})
      sender.program.push_back(operation::send(to, 100));
    sender.program.push_back(operation::step_end());
    p.actors.push_back(sender);
    for (int32_t host : {1, 2})
      p.actors.push_back({"receiver" + std::to_string(host), host, true,
                          {operation::receive(0), operation::step_end()}});
    EXPECT_NEAR(simulate(p).end_seconds, 2 / efficiency, simulator_tolerance) << efficiency;
  }
  simulated_plan alone = on_hosts(2);
  alone.link = link_model{100, 0, 0};
  alone.link.shared_efficiency = 0.5;
  alone.warmup_steps = 0;
  alone.actors.push_back({"sender", 0, true, {operation::send(1, 100), operation::step_end()}});
  alone.actors.push_back({"receiver", 1, true, {operation::receive(0), operation::step_end()}});
  EXPECT_NEAR(simulate(alone).end_seconds, 1, simulator_tolerance);
}

TEST(simulator, a_link_adds_its_transfer_and_latency_on_the_critical_path) {
  // One microbatch, 100 B at 100 B/s and 0.5 s latency each way: f0 + (1 + 0.5)
  // + f1 + b1 + (1 + 0.5) + b0.
  simulated_plan p = on_hosts(2);
  p.link = link_model{100, 0.5, 0};
  for (int32_t stage : {0, 1})
    p.actors.push_back(gpipe_stage(stage, 1, 1, 2, 100, 3));
  EXPECT_NEAR(simulate(p).step_seconds, 1 + 1.5 + 1 + 2 + 1.5 + 2, simulator_tolerance);
}

TEST(simulator, actors_on_one_core_take_the_sum_of_their_compute) {
  simulated_plan p = on_hosts(1, 1);
  p.warmup_steps = 0;
  p.actors.push_back({"a", 0, true, {operation::compute(1), operation::step_end()}});
  p.actors.push_back({"b", 0, true, {operation::compute(2), operation::step_end()}});
  EXPECT_NEAR(simulate(p).step_seconds, 3, simulator_tolerance);
  // Two cores: each its own; then each slowed by the co-location.
  p.machine_cores = {2};
  EXPECT_NEAR(simulate(p).step_seconds, 2, simulator_tolerance);
  p.runtime.colocation = 0.5;
  // Both at 1 / 1.5 until a is done at 1.5 s (b has 1 s done), b alone for 1 s.
  EXPECT_NEAR(simulate(p).step_seconds, 2.5, simulator_tolerance);
}

TEST(simulator, a_message_costs_the_runtime_at_both_ends) {
  // a sends b 1,000 bytes over a link of 1,000 bytes/s with 0.5 s latency:
  // the sender's cpu (message + remote + bytes), the wire (1 s + 0.5 s), the
  // receiver's cpu (the same); a message within a host pays only `message`.
  simulated_plan p = on_hosts(2);
  p.warmup_steps = 0;
  p.link = {1000, 0.5, 0};
  p.runtime.message_seconds = 0.1;
  p.runtime.remote_message_seconds = 0.2;
  p.runtime.byte_seconds = 1e-4;
  p.actors.push_back({"a", 0, true, {operation::send(1, 1000), operation::step_end()}});
  p.actors.push_back({"b", 1, true, {operation::receive(0), operation::step_end()}});
  const double end = 0.1 + 0.2 + 0.1;
  EXPECT_NEAR(simulate(p).step_seconds, end + 1.5 + end, simulator_tolerance);
  p.actors[1].host = 0;
  EXPECT_NEAR(simulate(p).step_seconds, 0.1 + 0.1, simulator_tolerance);
}

TEST(simulator, a_message_s_io_takes_its_machines_cores_beside_the_actors) {
  // a sends b 1,000 bytes (a link of no cost), then each computes 1 s; the
  // I/O is 1 ms a byte at each end (1 s), which neither actor waits for.
  const auto plan_on = [](int32_t cores) {
    simulated_plan p = on_hosts(2);
    p.machine_cores = {cores};
    p.hosts = {{0}, {0}};
    p.warmup_steps = 0;
    p.link = {1e15, 0, 0};
    p.runtime.io_byte_seconds = 1e-3;
    p.actors.push_back(
      {"a", 0, true, {operation::send(1, 1000), operation::compute(1), operation::step_end()}});
    p.actors.push_back(
      {"b", 1, true, {operation::receive(0), operation::compute(1), operation::step_end()}});
    return p;
  };
  // Both ends on one machine: 2 s of I/O. One core, three at work (a, b,
  // the I/O): a third each until the actors are done at 3 s.
  const simulation one = simulate(plan_on(1));
  EXPECT_NEAR(one.step_seconds, 3, simulator_tolerance);
  EXPECT_NEAR(one.wire_bytes, 1000, simulator_tolerance);
  // Two cores: 2/3 of a core each until the actors are done at 1.5 s.
  EXPECT_NEAR(simulate(plan_on(2)).step_seconds, 1.5, simulator_tolerance);
  // Three cores: a core each; none waits for the I/O.
  EXPECT_NEAR(simulate(plan_on(3)).step_seconds, 1, simulator_tolerance);
  // Within one host no message reaches a socket: no I/O.
  simulated_plan same = plan_on(1);
  same.actors[1].host = 0;
  EXPECT_NEAR(simulate(same).step_seconds, 2, simulator_tolerance);
}

TEST(simulator, emulated_hosts_share_their_machine) {
  // Two hosts on one machine of one core: the ring's two actors compute in turn.
  simulated_plan p = ring(2, 0, 3);
  p.machine_cores = {1};
  p.hosts = {{0}, {0}};
  for (auto& a : p.actors)
    for (size_t k = 0; k < a.program.size(); ++k)
      if (a.program[k].kind == operation::kind_t::step_end)
        a.program.insert(a.program.begin() + static_cast<long>(k++), operation::compute(1));
  EXPECT_NEAR(simulate(p).step_seconds, 2, simulator_tolerance);
}

TEST(simulator, a_credit_window_holds_the_sender) {
  // a sends three messages; b takes 1 s over each. With a window of 1, a's
  // third send waits for b to take the second (at 1 s), then a computes 10 s.
  const auto plan_with = [](int32_t window) {
    simulated_plan p = on_hosts(2);
    p.warmup_steps = 0;
    simulated_actor a{"a", 0, true, {}}, b{"b", 1, true, {}};
    for (int k = 0; k < 3; ++k) {
      a.program.push_back(operation::send(1, 0, window));
      b.program.push_back(operation::receive(0));
      b.program.push_back(operation::compute(1));
      if (k < 2) {
        a.program.push_back(operation::step_end());
        b.program.push_back(operation::step_end());
      }
    }
    a.program.push_back(operation::compute(10));
    a.program.push_back(operation::step_end());
    b.program.push_back(operation::step_end());
    p.actors = {a, b};
    return p;
  };
  EXPECT_NEAR(simulate(plan_with(0)).end_seconds, 10, simulator_tolerance);
  EXPECT_NEAR(simulate(plan_with(1)).end_seconds, 11, simulator_tolerance);
}

TEST(simulator, a_runtime_message_cost_occupies_both_ends) {
  // 1 s of work, a message (0.25 s at each end), 1 s of work, per step.
  simulated_plan p = on_hosts(2);
  p.runtime.message_seconds = 0.25;
  p.actors.push_back({"a", 0, true, {}});
  p.actors.push_back({"b", 1, true, {}});
  for (int k = 0; k < 3; ++k) {
    p.actors[0].program.insert(p.actors[0].program.end(),
                               {operation::compute(1), operation::send(1, 0),
                                operation::receive(1), operation::step_end()});
    p.actors[1].program.insert(p.actors[1].program.end(),
                               {operation::receive(0), operation::compute(1),
                                operation::send(0, 0), operation::step_end()});
  }
  EXPECT_NEAR(simulate(p).step_seconds, 1 + 0.25 + 0.25 + 1 + 0.25 + 0.25, simulator_tolerance);
}

TEST(simulator, a_burst_passes_at_once_and_refills_only_while_the_link_idles) {
  // Host 0 computes, sends 500 B to host 1 and waits for an empty reply; 1000 B/s,
  // latency 0.01 s each way.
  const auto plan = [](double compute, double burst) {
    simulated_plan p = on_hosts(2);
    p.link = link_model{1000, 0.01, 0};
    p.link.burst = burst;
    p.warmup_steps = 2; // the bucket's steady state
    simulated_actor ask{"ask", 0, true, {}}, answer{"answer", 1, true, {}};
    for (int32_t s = 0; s < 5; ++s) {
      ask.program.insert(ask.program.end(), {operation::compute(compute),
                                             operation::send(1, 500), operation::receive(1),
                                             operation::step_end()});
      answer.program.insert(answer.program.end(), {operation::receive(0),
                                                   operation::send(0, 0),
                                                   operation::step_end()});
    }
    p.actors = {ask, answer};
    return simulate(p).step_seconds;
  };
  // No burst: 1 + 0.5 + 2 x 0.01.
  EXPECT_NEAR(plan(1.0, 0), 1.52, simulator_tolerance);
  // 600 B refilled in the 1 s of compute: the 500 B pass at once.
  EXPECT_NEAR(plan(1.0, 600), 1.02, simulator_tolerance);
  // A bucket of 300 B: 200 B at the rate.
  EXPECT_NEAR(plan(1.0, 300), 1.22, simulator_tolerance);
  // 0.2 s of compute: the link idles 0.22 s a step (the two latencies and the compute) and
  // refills 220 B; 280 B at the rate: 0.2 + 0.28 + 0.02.
  EXPECT_NEAR(plan(0.2, 600), 0.5, simulator_tolerance);
  // A bucket of 3000 B would carry these five steps' 280 B short each: the steady state
  // is the same 0.5 s (a link that sends more than it refills drains any bucket).
  EXPECT_NEAR(plan(0.2, 3000), 0.5, simulator_tolerance);
  // And a bucket that refills in the compute stays full: 1.02 s.
  EXPECT_NEAR(plan(1.0, 3000), 1.02, simulator_tolerance);
}

TEST(simulator, refuses_a_plan_that_deadlocks_or_makes_no_sense) {
  simulated_plan p = on_hosts(2);
  p.actors.push_back({"a", 0, true, {operation::receive(1), operation::step_end(),
                                     operation::step_end()}});
  p.actors.push_back({"b", 1, true, {operation::receive(0), operation::step_end(),
                                     operation::step_end()}});
  EXPECT_THROW(simulate(p), baton::model::error);
  p.actors[1].program.pop_back();
  EXPECT_THROW(simulate(p), baton::model::error); // unequal steps
  EXPECT_THROW(simulate(simulated_plan{}), baton::model::error);
  // Two steps, one left out at each end: none measured; a negative cool-down.
  simulated_plan two = on_hosts(1);
  two.actors.push_back({"a", 0, true, {operation::compute(1), operation::step_end(),
                                       operation::compute(1), operation::step_end()}});
  two.cooldown_steps = 1;
  EXPECT_THROW(simulate(two), baton::model::error);
  two.warmup_steps = 0;
  EXPECT_NEAR(simulate(two).step_seconds, 1, simulator_tolerance);
  two.cooldown_steps = -1;
  EXPECT_THROW(simulate(two), baton::model::error);
}

// job: ist (issue 12, part A): the section and its errors, the plan as
// data, the settings codecs, the pieces a worker assembles and cuts back,
// and real runs (embedded, node processes) against the local reference,
// digest for digest, with the bytes every worker and shard counted.

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/role_settings.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "actors/modes/ist/round_timing.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/planning.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/settings_codec.hpp"

using namespace baton::actors;
using namespace baton::actors::ist;
using namespace baton::testing;
namespace model = baton::model;

namespace {

/// A small IST topology (synthetic data) with `section` as its `ist:`
/// section; line 2 is `job:`, line 11 the section.
std::string topology_text(const std::string& section, const std::string& extra = "") {
  return "# an IST test topology\n"
         "job: ist\n"
         "seed: 7\n"
         "data: {dataset: synthetic, synthetic_train: 192, synthetic_test: 64,\n"
         "       batch_size: 16, epochs: 1}\n"
         "backbone: {checkpoint: none,\n"
         "           pretrain: {task: all10}}\n"
         "tasks:\n"
         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
         "heads: [{name: all10, task: all10}]\n"
         "ist:\n" +
         section + extra;
}

caf::expected<topology> parse(const std::string& section, const std::string& extra = "") {
  return parse_topology(topology_text(section, extra), "ist.yaml", {});
}

/// The error text of a topology that must be refused.
std::string refusal(const std::string& section, const std::string& extra = "") {
  auto t = parse(section, extra);
  if (t) {
    ADD_FAILURE() << "accepted:\n" << section << extra;
    return "";
  }
  return baton::describe(t.error());
}

job_plan plan_for(const std::string& section, int32_t local_nodes = 0) {
  auto t = parse(section);
  if (!t) {
    ADD_FAILURE() << baton::describe(t.error());
    return {};
  }
  auto placed = local_nodes > 0 ? with_local_nodes(*t, local_nodes) : *t;
  auto plan = plan_of(placed);
  if (!plan) {
    ADD_FAILURE() << baton::describe(plan.error());
    return {};
  }
  return *plan;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

// -- the section --------------------------------------------------------------------

TEST(ist_section, refuses_bad_input_with_file_and_line) {
  for (const std::string& bad :
       {"  kind: dropout\n", "  model: resnet18\n", "  workers: 0\n",
        "  workers: 65\n", "  shards: 0\n", "  local_steps: 0\n", "  hidden: []\n",
        "  hidden: [a]\n", "  hidden: 4096\n", "  optimizer: {lr: 0}\n",
        "  optimizer: {momentum: 1}\n", "  optimizer: {lr_scaling: linear}\n", "  worker: 2\n"}) {
    auto text = refusal(bad);
    EXPECT_TRUE(has(text, "ist.yaml:12")) << bad << text;
  }
  auto narrow = refusal("  workers: 3\n  hidden: [64,\n     2]\n");
  EXPECT_TRUE(has(narrow, "ist.yaml:14")) << narrow;
  EXPECT_TRUE(has(narrow, "at least 3")) << narrow;
  EXPECT_TRUE(has(refusal("  workers: 2\n  shards: 5\n  hidden: [4]\n"), "at least 5"));
  EXPECT_TRUE(has(refusal("  workers: 2\n  nodes: [a]\n"), "nodes"));
  // Faults count rounds (1 here: 6 local steps per worker, L = 10); the
  // workers and shards send no microbatches on credit edges: no delay, no drop.
  auto delay = refusal("  workers: 2\n", "faults: [{kind: delay, from: worker.0, to: shard.0, "
                                         "delay_ms: 5}]\n");
  EXPECT_TRUE(has(delay, "ist.yaml:13")) << delay;
  EXPECT_TRUE(has(delay, "not supported by job: ist")) << delay;
  auto late = refusal("  workers: 2\n", "faults: [{kind: throw, actor: shard.1, at_step: 1}]\n");
  EXPECT_TRUE(has(late, "ist.yaml:13")) << late;
  EXPECT_TRUE(has(late, "1 rounds")) << late;
  EXPECT_TRUE(has(refusal("  workers: 2\n", "faults: [{kind: throw, actor: source, at_step: 0}]\n"),
                  "worker.0, worker.1, shard.0, shard.1"));
  EXPECT_TRUE(parse("  workers: 2\n", "faults: [{kind: throw, actor: shard.1, at_step: 0}]\n"
                                       "runtime: {checkpoint_every: 2}\n"));
  // Batch norm with batch statistics: a minibatch of one sample is refused.
  auto text = topology_text("  workers: 2\n");
  text.replace(text.find("batch_size: 16"), 14, "batch_size: 1");
  auto one = parse_topology(text, "ist.yaml", {});
  ASSERT_FALSE(one);
  EXPECT_TRUE(has(baton::describe(one.error()), "ist.yaml:5")) << baton::describe(one.error());
  // The shards make the network from the seed: a pretrained backbone would go unread.
  text = topology_text("  workers: 2\n");
  text.replace(text.find("checkpoint: none"), 16, "checkpoint: pretrained.pt");
  auto pretrained = parse_topology(text, "ist.yaml", {});
  ASSERT_FALSE(pretrained);
  const auto why = baton::describe(pretrained.error());
  EXPECT_TRUE(has(why, "ist.yaml:6")) << why;
  EXPECT_TRUE(has(why, "from the seed")) << why;
  // Its section is read with its job only.
  text = topology_text("  workers: 2\n");
  text.replace(text.find("job: ist"), 8, "job: pipeline");
  auto other = parse_topology(text, "ist.yaml", {});
  ASSERT_FALSE(other);
  EXPECT_TRUE(has(baton::describe(other.error()), "only read with job: ist"));
}

TEST(ist_section, defaults_two_workers_two_shards) {
  auto t = parse("");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto p = plan_of(*t);
  ASSERT_TRUE(p) << baton::describe(p.error());
  EXPECT_EQ(p->actors.size(), 4u);
  EXPECT_EQ(p->edges.size(), 8u);
}

// What `baton profile`, predict and compare time is the job's network, as
// its section settles it: the mlp cut into subnets (ist_mlp, its widths),
// stepped by its optimizer; ResIST's resnet18 is the backbone itself.
TEST(ist_section, settles_the_network_it_trains) {
  auto t = parse("  hidden: [48, 24]\n  optimizer: {lr: 0.25}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  const trained_model m = trained_model_of(*t);
  EXPECT_EQ(m.spec.name, "ist_mlp");
  EXPECT_EQ(m.spec.hidden, (std::vector<int64_t>{48, 24}));
  EXPECT_EQ(m.spec.classes, 10);
  EXPECT_DOUBLE_EQ(m.optimizer.lr, 0.25);
  auto resist = parse("  kind: resist\n");
  ASSERT_TRUE(resist) << baton::describe(resist.error());
  EXPECT_EQ(trained_model_of(*resist).spec.name, "resnet18");
}

// -- the plan -----------------------------------------------------------------------

TEST(ist_plan, is_w_workers_and_s_shards_all_wired_to_all) {
  auto p = plan_for("  workers: 3\n  shards: 2\n  hidden: [50, 37]\n");
  ASSERT_EQ(p.actors.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const auto& a = p.actors[i];
    bool worker = i < 3;
    EXPECT_EQ(a.role, worker ? "ist_worker" : "ist_shard");
    EXPECT_EQ(a.name, worker ? "worker." + std::to_string(i) : "shard." + std::to_string(i - 3));
    EXPECT_TRUE(a.trainable); // workers checkpoint counters, shards their slices
    EXPECT_TRUE(a.starts);
    EXPECT_EQ(a.result, worker ? "workers" : "");
    EXPECT_EQ(a.sends_weights, !worker); // the shards' owned slices: the whole network
    EXPECT_EQ(a.node, "");
  }
  std::vector<std::string> edges;
  for (const auto& e : p.edges) {
    EXPECT_EQ(e.kind, planned_edge::kind_t::peer);
    edges.push_back(e.from + ">" + e.to + "#" + std::to_string(e.index));
  }
  EXPECT_EQ(edges, (std::vector<std::string>{
                     "worker.0>shard.0#0", "shard.0>worker.0#0", "worker.0>shard.1#1",
                     "shard.1>worker.0#0", "worker.1>shard.0#0", "shard.0>worker.1#1",
                     "worker.1>shard.1#1", "shard.1>worker.1#1", "worker.2>shard.0#0",
                     "shard.0>worker.2#2", "worker.2>shard.1#1", "shard.1>worker.2#2"}));
}

TEST(ist_plan, places_shard_s_with_worker_s_mod_w) {
  auto p = plan_for("  workers: 2\n  shards: 3\n  hidden: [8]\n", 2);
  ASSERT_EQ(p.actors.size(), 5u);
  EXPECT_NE(p.actors[0].node, p.actors[1].node);
  EXPECT_FALSE(p.actors[0].node.empty());
  EXPECT_EQ(p.actors[2].node, p.actors[0].node); // shard.0
  EXPECT_EQ(p.actors[3].node, p.actors[1].node); // shard.1
  EXPECT_EQ(p.actors[4].node, p.actors[0].node); // shard.2
}

TEST(ist_plan, refuses_a_shard_larger_than_a_message) {
  auto t = parse("  workers: 1\n  hidden: [8192, 8192]\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto p = plan_of(*t);
  ASSERT_FALSE(p);
  EXPECT_TRUE(has(baton::describe(p.error()), "64 MiB")) << baton::describe(p.error());
}

TEST(ist_plan, settings_round_trip_and_garbage_is_refused) {
  auto p = plan_for("  workers: 3\n  shards: 2\n  local_steps: 4\n  hidden: [50, 37]\n");
  ASSERT_EQ(p.actors.size(), 5u);
  auto worker = neuron_scheme::parse_worker_settings(p.actors[2].settings);
  ASSERT_TRUE(worker) << baton::describe(worker.error());
  EXPECT_EQ(worker->worker, 2);
  EXPECT_EQ(worker->workers, 3);
  EXPECT_EQ(worker->shards, 2);
  EXPECT_EQ(worker->local_steps, 4);
  EXPECT_EQ(worker->shape.inputs, 784);
  EXPECT_EQ(worker->shape.hidden, (std::vector<int64_t>{50, 37}));
  EXPECT_EQ(worker->shape.classes, 10);
  EXPECT_EQ(worker->data.plan.batch_size, 16);
  EXPECT_EQ(neuron_scheme::to_yaml(*worker), p.actors[2].settings);
  auto shard = neuron_scheme::parse_shard_settings(p.actors[4].settings);
  ASSERT_TRUE(shard) << baton::describe(shard.error());
  EXPECT_EQ(shard->shard, 1);
  EXPECT_EQ(shard->seed, 7u);
  EXPECT_EQ(neuron_scheme::to_yaml(*shard), p.actors[4].settings);
  // The runtime's `run:` (with_run at each spawn): checkpoints, the restore
  // round, the throw round; a restore without a checkpoint directory is refused.
  run_settings run;
  run.recovery = {"/tmp/checkpoints/shard.1", 2, 4, 5, 3};
  auto restored = neuron_scheme::parse_shard_settings(with_run(p.actors[4].settings, run));
  ASSERT_TRUE(restored) << baton::describe(restored.error());
  EXPECT_EQ(restored->recovery.checkpoint_dir, "/tmp/checkpoints/shard.1");
  EXPECT_EQ(restored->recovery.restore_step, 4);
  EXPECT_EQ(restored->recovery.throw_at_step, 5);
  auto resumed = neuron_scheme::parse_worker_settings(with_run(p.actors[2].settings, run));
  ASSERT_TRUE(resumed) << baton::describe(resumed.error());
  EXPECT_EQ(resumed->recovery.checkpoint_every, 2);
  EXPECT_EQ(neuron_scheme::to_yaml(*resumed), with_run(p.actors[2].settings, run));
  run.recovery.checkpoint_dir.clear();
  run.recovery.checkpoint_every = 0;
  EXPECT_FALSE(neuron_scheme::parse_worker_settings(with_run(p.actors[2].settings, run)));
  EXPECT_FALSE(neuron_scheme::parse_shard_settings(with_run(p.actors[4].settings, run)));
  auto narrow = p.actors[2].settings; // a width below W
  narrow.replace(narrow.find("- 37"), 4, "- 2");
  expect_bad_config(neuron_scheme::parse_worker_settings,
                    {"", "[1, 2]", "worker: 5", narrow, p.actors[4].settings});
  expect_bad_config(neuron_scheme::parse_shard_settings, {"shard: 2", p.actors[0].settings});
}

// -- the pieces a worker assembles and sends back -------------------------------------

namespace {

bool same(const model::ist::network& a, const model::ist::network& b) {
  auto x = a.parameters(), y = b.parameters();
  if (x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!torch::equal(x[i], y[i]))
      return false;
  return true;
}

} // namespace

TEST(ist_pieces, assemble_to_the_slice_and_write_back_in_place) {
  const model::ist::shape shape{12, {7, 5, 9}, 3};
  for (int32_t workers : {1, 2, 3})
    for (int32_t shards : {1, 2, 3, 5}) {
      auto whole = model::ist::make_network(shape, 11);
      const auto partition = model::ist::make_partition(shape.hidden, workers, 11, 4);
      auto expected = whole.clone(), actual = whole.clone();
      for (int32_t w = 0; w < workers; ++w) {
        std::vector<std::vector<at::Tensor>> from;
        for (int32_t s = 0; s < shards; ++s)
          from.push_back(take_pieces(
            whole, partition, w, model::ist::shard_pieces(shape, partition, w, s, shards)));
        auto subnet = assemble_subnet(shape, partition, w, from);
        ASSERT_TRUE(same(subnet, model::ist::slice_subnet(whole, partition, w)))
          << "W=" << workers << " S=" << shards << " w=" << w;
        for (auto& p : subnet.parameters()) // "trained"
          p.add_(1.0f + static_cast<float>(w));
        model::ist::write_back_subnet(expected, subnet, partition, w);
        for (int32_t s = 0; s < shards; ++s)
          put_pieces(actual, partition, w,
                     model::ist::shard_pieces(shape, partition, w, s, shards),
                     split_subnet(subnet, shape, partition, w, s, shards));
      }
      EXPECT_TRUE(same(actual, expected)) << "W=" << workers << " S=" << shards;
    }
}

TEST(ist_pieces, a_round_is_timed_as_the_roles_run_it) {
  // What `baton predict` puts in IST's simulated plan: every part of a round took some
  // time, with one copy and with two side by side; nonsense is refused.
  const model::ist::shape shape{12, {8}, 3};
  const model::optimizer_spec sgd{0.01, 0.0, 0.0};
  for (int32_t copies : {1, 2}) {
    const auto t = time_round(shape, 2, 2, 3, 4, sgd, copies);
    EXPECT_GT(t.step, 0) << copies;
    EXPECT_GT(t.round.assemble, 0) << copies;
    EXPECT_GT(t.round.split, 0) << copies;
    EXPECT_GT(t.round.partition, 0) << copies;
    EXPECT_GT(t.round.take, 0) << copies;
    EXPECT_GT(t.round.put, 0) << copies;
  }
  EXPECT_THROW(time_round(shape, 2, 2, 3, 4, sgd, 0), model::error);
  EXPECT_THROW(time_round(shape, 9, 2, 3, 4, sgd, 1), model::error); // 9 workers, 8 neurons
}

TEST(ist_pieces, owned_slices_make_the_whole_network) {
  const model::ist::shape shape{12, {7, 5}, 3};
  const auto whole = model::ist::make_network(shape, 3);
  const auto all = whole_partition(shape);
  for (int32_t shards : {1, 2, 5}) {
    auto assembled = model::ist::make_network(shape, 4); // other values everywhere
    int64_t elements = 0;
    for (int32_t s = 0; s < shards; ++s) {
      const auto pieces = model::ist::shard_pieces(shape, all, 0, s, shards);
      put_pieces(assembled, all, 0, pieces, take_pieces(whole, all, 0, pieces));
      elements += owned_elements(shape, s, shards);
    }
    EXPECT_TRUE(same(assembled, whole)) << "S=" << shards;
    EXPECT_EQ(elements, whole.numel());
  }
}

TEST(ist_pieces, refuses_a_piece_of_the_wrong_shape) {
  const model::ist::shape shape{12, {7, 5}, 3};
  auto whole = model::ist::make_network(shape, 3);
  const auto partition = model::ist::make_partition(shape.hidden, 2, 3, 0);
  auto pieces = take_pieces(whole, partition, 1,
                            model::ist::shard_pieces(shape, partition, 1, 0, 1));
  auto wrong = pieces;
  wrong[0] = torch::zeros({1, 12});
  EXPECT_THROW(assemble_subnet(shape, partition, 1, {wrong}), model::error);
  wrong.pop_back();
  EXPECT_THROW(assemble_subnet(shape, partition, 1, {wrong}), model::error);
  pieces[1] = pieces[1].to(torch::kDouble);
  EXPECT_THROW(put_pieces(whole, partition, 1,
                          model::ist::shard_pieces(shape, partition, 1, 0, 1), pieces),
               model::error);
}

// -- runs against the local reference ------------------------------------------------

namespace {

class ist_run : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("ist"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/ist.yaml made small: synthetic data, 200 samples of 16 per
  /// step: floor(12 / W) local steps per worker per epoch, 3 per round.
  static std::vector<std::string> job(int32_t workers, int32_t shards,
                                      const std::string& hidden = "[64]") {
    return {"run",   source_path("configs/ist.yaml"),
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=200",
            "--set", "data.synthetic_test=64",
            "--set", "data.batch_size=16",
            "--set", "data.epochs=2",
            "--set", "ist.hidden=" + hidden,
            "--set", "ist.local_steps=3",
            "--set", "ist.optimizer.momentum=0.5", // reset every round: tested too
            "--set", "ist.workers=" + std::to_string(workers),
            "--set", "ist.shards=" + std::to_string(shards),
            "--set", "runtime.compute_threads=1"};
  }

  static void expect_exactly_once(const nlohmann::json& m, int32_t workers, int64_t steps) {
    ASSERT_TRUE(m.contains("trained")) << m.dump();
    int64_t trained = 0;
    for (const auto& [actor, count] : m.at("trained").items()) {
      EXPECT_EQ(count.at("trained").get<int64_t>(), steps) << actor;
      trained += count.at("trained").get<int64_t>();
    }
    EXPECT_EQ(trained, workers * steps);
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

/// Bytes on the edges from `from` (to `to`, when given) in a run's metrics.
int64_t edge_bytes(const nlohmann::json& m, const std::string& from, const std::string& to = "") {
  int64_t bytes = 0;
  for (const auto& e : m.at("edges"))
    if (e.at("from") == from && (to.empty() || e.at("to") == to))
      bytes += e.at("bytes").get<int64_t>();
  return bytes;
}

} // namespace

// W = 2 S = 2; W = 3 S = 2 with widths 3 does not divide (and a last round
// of one step); W = 1 S = 1: the actors' network is the reference's, bit
// for bit, and every worker trains each of its minibatches once.
TEST_F(ist_run, embedded_equals_the_local_reference) {
  struct shape {
    int32_t workers, shards;
    std::string hidden;
  };
  for (const auto& c : {shape{2, 2, "[64]"}, shape{3, 2, "[50, 37]"}, shape{1, 1, "[16]"}}) {
    auto tag = "w" + std::to_string(c.workers) + "s" + std::to_string(c.shards);
    auto local = run_job(*dir_, with(job(c.workers, c.shards, c.hidden), {"--mode", "local"}),
                         tag + "-local");
    auto actors = run_job(*dir_, job(c.workers, c.shards, c.hidden), tag + "-embedded");
    auto reference = digests_by_actor(local, "ist_worker");
    ASSERT_EQ(reference.size(), 1u) << tag; // worker.0: the whole network
    EXPECT_EQ(digests_by_actor(actors, "ist_worker"), reference) << tag;
    expect_exactly_once(actors, c.workers, 2 * (12 / c.workers));
  }
}

// A learning-rate schedule (cosine after half an epoch's warm-up; refused
// under job: ist until 2026-12-06): each local step takes the lr of its
// step in the run, counted as the local reference counts it (4 steps per
// worker per epoch in rounds of 3 and 1 here), so the actors end with the
// reference's network, embedded and over node processes, and not with the
// constant lr's.
TEST_F(ist_run, a_learning_rate_schedule_equals_the_local_reference) {
  const auto at = model::ist::steps_of_round(3, 4, 3, 2);
  EXPECT_EQ(at.first, 7); // epoch 1's second round: 4 + 3
  EXPECT_EQ(model::ist::steps_of_round(2, 4, 3, 2).first, 4);
  const auto scheduled =
    with(job(3, 2, "[50, 37]"), {"--set", "ist.optimizer.schedule=cosine", "--set",
                                 "ist.optimizer.warmup_epochs=0.5"});
  auto reference = digests_by_actor(
    run_job(*dir_, with(scheduled, {"--mode", "local"}), "cosine-local"), "ist_worker");
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, scheduled, "cosine-embedded"), "ist_worker"),
            reference);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(scheduled, {"--local-nodes", "2"}),
                                     "cosine-nodes"),
                             "ist_worker"),
            reference);
  EXPECT_NE(digests_by_actor(run_job(*dir_, with(job(3, 2, "[50, 37]"), {"--mode", "local"}),
                                     "constant-local"),
                             "ist_worker"),
            reference);
}

// Two node processes: the same network; the bytes each worker sends and
// receives per round are its subnet's scalars x 4, each way (the shards
// also send worker 0 their owned slices after each epoch).
TEST_F(ist_run, node_processes_equal_embedded_and_count_the_subnet_bytes) {
  auto embedded = run_job(*dir_, job(2, 2), "embedded");
  auto nodes = run_job(*dir_, with(job(2, 2), {"--local-nodes", "2"}), "nodes");
  auto digests = digests_by_actor(embedded, "ist_worker");
  ASSERT_EQ(digests.size(), 1u);
  EXPECT_EQ(digests_by_actor(nodes, "ist_worker"), digests);
  const model::ist::shape shape{784, {64}, 10};
  const int64_t rounds = 2 * 2; // 2 epochs of 6 steps, 3 per round
  for (int32_t w = 0; w < 2; ++w) {
    int64_t elements = 0;
    for (int64_t r = 0; r < rounds; ++r)
      elements += model::ist::subnet_elements(
        shape, model::ist::make_partition(shape.hidden, 2, 42, r), w);
    const auto worker = "worker." + std::to_string(w);
    EXPECT_EQ(edge_bytes(nodes, worker), 4 * elements) << worker;
    int64_t owned = 0; // the epochs' owned slices to worker 0
    for (int32_t s = 0; w == 0 && s < 2; ++s)
      owned += 2 * 4 * owned_elements(shape, s, 2);
    EXPECT_EQ(edge_bytes(nodes, "shard.0", worker) + edge_bytes(nodes, "shard.1", worker),
              4 * elements + owned)
      << worker;
  }
}

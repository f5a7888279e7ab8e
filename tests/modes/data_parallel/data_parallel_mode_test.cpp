// job: data-parallel (issue 11), ring all-reduce, BSP: the section and its
// errors, the plan as data, one worker's ring exchange against
// model::ring_allreduce, and real runs (embedded, node processes) against
// the local reference, digest for digest.

#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/ring_exchange.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/error.hpp"
#include "tests/modes/data_parallel/small_job.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/settings_codec.hpp"
#include "tests/support/text.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::actors;
using namespace baton::actors::data_parallel;
using namespace baton::testing;

namespace {

/// The small data-parallel job with the `data_parallel:` section under test.
const topology_fixture mode_dp = data_parallel_topology("dp.yaml");

} // namespace

// -- the section --------------------------------------------------------------------

TEST(data_parallel_section, refuses_bad_input_with_file_and_line) {
  EXPECT_NE(mode_dp.refusal("  exchange: hub\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  exchange: hub\n").find("ring"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  workers: 0\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  workers: many\n").find("from 1 to 64"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  bucket_mb: -1\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  model: vgg\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  worker: 2\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  optimizer: {lr: 0}\n").find("dp.yaml:12"), std::string::npos);
  EXPECT_NE(mode_dp.refusal("  optimizer: {lr_scaling: square}\n").find("dp.yaml:12"),
            std::string::npos);
  EXPECT_NE(mode_dp.refusal("  optimizer: {warmup_epochs: -1}\n").find("dp.yaml:12"),
            std::string::npos);
  EXPECT_NE(mode_dp.refusal("  workers: 2\n  nodes: [a]\n").find("nodes"), std::string::npos);
  // The workload's optimizer section and its older name: one of them.
  auto both = mode_dp.refusal("  optimizer: {lr: 0.1}\noptimizer: {lr: 0.2}\n");
  EXPECT_NE(both.find("dp.yaml:12"), std::string::npos) << both;
  EXPECT_NE(both.find("older name"), std::string::npos) << both;
  EXPECT_NE(mode_dp.refusal("  workers: 2\noptimizer: {name: lamb}\n").find("adamw"),
            std::string::npos);
  EXPECT_NE(mode_dp.refusal("  workers: 2\noptimizer: {name: adam, momentum: 0.9}\n").find("betas"),
            std::string::npos);
  // A shard holds a key range only: no global norm to clip with.
  auto clip = mode_dp.refusal("  exchange: ps\noptimizer: {clip_grad_norm: 1}\n");
  EXPECT_NE(clip.find("parameter shard"), std::string::npos) << clip;
  // Faults the ring cannot replay exactly (no credit edge for a drop).
  auto faults = mode_dp.refusal("  workers: 2\n"
                           "faults: [{kind: drop, from: worker.0, to: worker.1, at_step: 2}]\n");
  EXPECT_NE(faults.find("dp.yaml:13"), std::string::npos) << faults;
  EXPECT_NE(faults.find("not supported by job: data-parallel"), std::string::npos) << faults;
  // A fault past the job's end, counted in the steps its W workers take together.
  auto late =
      mode_dp.refusal("  workers: 2\nfaults: [{kind: throw, actor: worker.0, at_step: 6}]\n");
  EXPECT_NE(late.find("at_step' is 6, but the job has 6 steps (1 epoch x 6 steps of 2 workers x "
                      "16 samples from 192 training samples), so the fault would never fire "
                      "(expected a step from 0 to 5)"),
            std::string::npos)
    << late;
  // Its section is read with its job only.
  auto text = mode_dp.text("  workers: 2\n");
  text.replace(text.find("job: data-parallel"), 18, "job: pipeline");
  auto other = mode_dp.parse_text(text);
  ASSERT_FALSE(other);
  EXPECT_NE(baton::describe(other.error()).find("only read with job: data-parallel"),
            std::string::npos);
}

// An mlp named by the section trains samples the default convnet cannot take
// (4x4): the backbone section names no model, so no convnet is built.
TEST(data_parallel_section, an_mlp_takes_samples_under_8x8) {
  const topology_fixture mlp = data_parallel_topology("dp.yaml", "mlp");
  auto text = mlp.text("");
  const std::string data = "synthetic_test: 64,";
  text.replace(text.find(data), data.size(), data + " synthetic_shape: [1, 4, 4],");
  auto t = mlp.parse_text(text);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->backbone.name, "mlp"); // the section's model replaces backbone.model
  EXPECT_EQ(t->sample_shape, (std::vector<int64_t>{1, 4, 4}));
}

TEST(data_parallel_section, defaults_two_workers_over_a_ring) {
  auto t = mode_dp.parse("");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto p = plan_of(*t);
  ASSERT_TRUE(p) << baton::describe(p.error());
  ASSERT_EQ(p->actors.size(), 2u);
  EXPECT_EQ(p->edges.size(), 2u);
}

// Issue 36: the plan is made once and the budget it leaves unset is a step
// over it: one worker has the machine's cores, in the plan and in the
// settings it is spawned with.
TEST(data_parallel_section, one_worker_gets_every_core_in_its_settings) {
  auto t = mode_dp.parse("  workers: 1\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto p = plan_of(*t);
  ASSERT_TRUE(p) << baton::describe(p.error());
  ASSERT_EQ(p->actors.size(), 1u);
  EXPECT_EQ(p->actors[0].threads, cores());
  auto settings = parse_worker_settings(p->actors[0].settings);
  ASSERT_TRUE(settings) << baton::describe(settings.error());
  EXPECT_EQ(settings->threads, cores());
}

// -- the plan -----------------------------------------------------------------------

TEST(data_parallel_plan, is_w_workers_on_a_ring) {
  auto p = mode_dp.plan_for("  workers: 3\n");
  ASSERT_EQ(p.actors.size(), 3u);
  for (size_t w = 0; w < 3; ++w) {
    const auto& a = p.actors[w];
    EXPECT_EQ(a.role, "data_parallel_worker");
    EXPECT_EQ(a.name, "worker." + std::to_string(w));
    EXPECT_TRUE(a.trainable);
    EXPECT_TRUE(a.starts); // no source: each reads its own share
    EXPECT_EQ(a.result, "workers");
    EXPECT_EQ(a.sends_weights, w == 0);
    EXPECT_EQ(a.node, "");
  }
  std::vector<std::string> ring;
  for (const auto& e : p.edges) {
    EXPECT_EQ(e.kind, planned_edge::kind_t::peer);
    ring.push_back(e.from + ">" + e.to + "#" + std::to_string(e.index));
  }
  EXPECT_EQ(ring, (std::vector<std::string>{"worker.0>worker.1#1", "worker.1>worker.2#2",
                                            "worker.2>worker.0#0"}));
  EXPECT_TRUE(mode_dp.plan_for("  workers: 1\n").edges.empty());
}

TEST(data_parallel_plan, places_one_worker_per_node) {
  auto p = mode_dp.plan_for("  workers: 2\n", 2);
  ASSERT_EQ(p.actors.size(), 2u);
  EXPECT_NE(p.actors[0].node, p.actors[1].node);
  EXPECT_FALSE(p.actors[0].node.empty());
}

TEST(data_parallel_plan, worker_settings_round_trip_and_garbage_is_refused) {
  auto p = mode_dp.plan_for("  workers: 3\n  bucket_mb: 0.5\n");
  ASSERT_EQ(p.actors.size(), 3u);
  auto spec = data_parallel::parse_worker_settings(p.actors[2].settings);
  ASSERT_TRUE(spec) << baton::describe(spec.error());
  EXPECT_EQ(spec->worker, 2);
  EXPECT_EQ(spec->workers, 3);
  EXPECT_EQ(spec->bucket_mb, 0.5);
  EXPECT_EQ(spec->model.name, "convnet");
  EXPECT_EQ(spec->data.plan.batch_size, 16);
  EXPECT_EQ(to_yaml(*spec), p.actors[2].settings);
  auto two = p.actors[2].settings; // worker 2 of 2 workers
  two.replace(two.find("workers: 3"), 10, "workers: 2");
  expect_bad_config(data_parallel::parse_worker_settings, {"", "[1, 2]", "worker: 5", two});
}

// -- one worker's side of the ring --------------------------------------------------

namespace {

/// W ring_exchange objects passing their messages around: each sends as
/// soon as it can, and a receiver takes the messages of its predecessor in
/// the order they were sent, as CAF delivers them between two actors. With
/// `overlapped`, every worker puts its buckets one at a time, last first,
/// taking what has arrived between two puts (a backward that finishes the
/// buckets while chunks arrive). Messages view the senders' buckets and are
/// read only when delivered, as CAF's I/O thread serializes them.
std::vector<at::Tensor> simulate_ring(const std::vector<std::vector<at::Tensor>>& per_worker,
                                      bool overlapped = false) {
  const auto w_count = static_cast<int32_t>(per_worker.size());
  std::vector<ring_exchange> ring;
  std::vector<std::deque<ring_message>> in_flight(per_worker.size()); ///< by sender
  auto post = [&](int32_t w, std::vector<ring_message> messages) {
    for (auto& m : messages)
      in_flight[static_cast<size_t>(w)].push_back(std::move(m));
  };
  // One message of each sender that has one delivered; whether any was.
  auto deliver = [&] {
    bool moved = false;
    for (int32_t w = 0; w < w_count; ++w) {
      auto& queue = in_flight[static_cast<size_t>(w)];
      if (queue.empty())
        continue;
      moved = true;
      auto next = baton::model::ring_next(w, w_count);
      auto m = std::move(queue.front());
      queue.pop_front();
      post(next, ring[static_cast<size_t>(next)].receive(std::move(m)));
    }
    return moved;
  };
  for (int32_t w = 0; w < w_count; ++w) {
    ring.emplace_back(w, w_count);
    std::vector<at::Tensor> copies;
    for (const auto& b : per_worker[static_cast<size_t>(w)])
      copies.push_back(b.clone());
    if (!overlapped) {
      post(w, ring.back().begin(std::move(copies)));
      continue;
    }
    std::vector<int64_t> sizes;
    for (const auto& b : copies)
      sizes.push_back(b.numel());
    ring.back().start(sizes);
  }
  for (size_t b = per_worker.front().size(); overlapped && b-- > 0;) {
    for (int32_t w = 0; w < w_count; ++w)
      post(w, ring[static_cast<size_t>(w)].put(b, per_worker[static_cast<size_t>(w)][b].clone()));
    deliver();
  }
  while (deliver()) {
  }
  for (const auto& r : ring)
    EXPECT_TRUE(r.done());
  return ring.front().means();
}

} // namespace

TEST(ring_exchange, equals_the_reference_ring_bit_for_bit) {
  torch::manual_seed(3);
  for (bool overlapped : {false, true})
    for (int32_t w_count : {1, 2, 3, 4, 7}) {
      std::vector<std::vector<at::Tensor>> per_worker(static_cast<size_t>(w_count));
      for (auto& buckets : per_worker)
        for (int64_t size : {11, 2, 1000}) // uneven chunks, and chunks of nothing
          buckets.push_back(torch::randn({size}) * 100);
      auto means = simulate_ring(per_worker, overlapped);
      ASSERT_EQ(means.size(), 3u);
      for (size_t b = 0; b < 3; ++b) {
        std::vector<at::Tensor> inputs;
        for (const auto& buckets : per_worker)
          inputs.push_back(buckets[b]);
        EXPECT_TRUE(torch::equal(means[b], baton::model::mean_of_sum(
                                             baton::model::ring_allreduce(inputs), w_count)))
          << "W=" << w_count << " bucket " << b << (overlapped ? " overlapped" : "");
      }
    }
}

TEST(ring_exchange, keeps_an_early_round_and_refuses_a_bad_one) {
  ring_exchange r(1, 3); // 2 buckets of 9: rounds 0..3 and 4..7, chunks of 3
  r.start({9, 9});
  EXPECT_EQ(r.put(1, torch::ones({9})).size(), 1u); // bucket 1's first round, at once
  EXPECT_THROW(r.put(1, torch::ones({9})), baton::model::error);  // twice
  EXPECT_THROW(r.put(0, torch::ones({8})), baton::model::error);  // wrong size
  EXPECT_THROW(r.put(2, torch::ones({9})), baton::model::error);  // no such bucket
  EXPECT_TRUE(r.receive({4, torch::ones({3})}).empty()); // bucket 1's, early: kept
  EXPECT_THROW(r.receive({4, torch::ones({3})}), baton::model::error); // twice
  EXPECT_THROW(r.receive({8, torch::ones({3})}), baton::model::error); // no such round
  EXPECT_THROW(r.receive({0, torch::zeros({4})}), baton::model::error);
  EXPECT_THROW(r.receive({0, torch::zeros({3}, torch::kInt64)}), baton::model::error);
  EXPECT_TRUE(r.receive({0, torch::ones({3})}).empty()); // bucket 0 is not here yet
  EXPECT_EQ(r.expected_round(), 0);
  // Bucket 0 arrives: its first round goes out, round 0 is applied (round 1 follows).
  EXPECT_EQ(r.put(0, torch::ones({9})).size(), 2u);
  EXPECT_EQ(r.expected_round(), 1);
  EXPECT_THROW(ring_exchange(3, 3), baton::model::error);
}

// -- runs against the local reference ------------------------------------------------

namespace {

class data_parallel_run : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("data-parallel"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/data-parallel.yaml made small: synthetic data, a few steps.
  static std::vector<std::string> job(int32_t workers, const std::string& bucket_mb = "25") {
    return {"run",   source_path("configs/data-parallel.yaml"),
            "--set", "data_parallel.bucket_mb=" + bucket_mb,
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=200", // 200 / W: padded for W = 3
            "--set", "data.synthetic_test=64",
            "--set", "data.batch_size=16",
            "--set", "data.epochs=2",
            "--set", "data_parallel.model=convnet",
            "--set", "data_parallel.workers=" + std::to_string(workers),
            "--set", "runtime.compute_threads=1"};
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// W = 2 (one bucket) and W = 3 (uneven chunks, a padded share, ~7 buckets
// of the convnet's 1.7 MiB): the actors' weights are the reference's, bit
// for bit, on every worker.
TEST_F(data_parallel_run, embedded_equals_the_local_reference) {
  for (int32_t workers : {2, 3}) {
    auto tag = "w" + std::to_string(workers);
    auto bucket_mb = workers == 2 ? "25" : "0.25";
    const auto& local =
      shared_run(*dir_, with(job(workers, bucket_mb), {"--mode", "local"}), tag + "-local");
    const auto& actors = shared_run(*dir_, job(workers, bucket_mb), tag + "-embedded");
    auto reference = digests_by_actor(local, "data_parallel_worker");
    ASSERT_EQ(reference.size(), static_cast<size_t>(workers));
    EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker"), reference) << tag;
    // ceil(ceil(200 / W) / 16) steps per epoch, 2 epochs.
    int64_t share = (200 + workers - 1) / workers;
    expect_steps_trained(actors, workers, 2 * ((share + 15) / 16));
  }
}

// The training after the warm-up (what `baton bench` rates): from the first
// progress report of the actors, or as many samples of the local run, every
// epoch's training after it; the same weights. The local run on two threads computes
// the two workers at once, one thread each, with the actors' sums.
TEST_F(data_parallel_run, the_steady_training_follows_the_first_progress_report) {
  auto reporting = with(job(2), {"--set", "runtime.progress_every=3"});
  for (const auto& run : {run_job(*dir_, with(reporting, {"--mode", "local", "--threads", "2"}),
                                  "steady-local"),
                          run_job(*dir_, reporting, "steady-embedded")}) {
    SCOPED_TRACE(run.at("run").get<std::string>());
    ASSERT_TRUE(run.contains("steady"));
    auto samples = run.at("steady").at("samples").get<int64_t>();
    auto seconds = run.at("steady").at("seconds").get<double>();
    // 3 steps of 2 x 16 samples warm up, of 2 epochs of 7 steps.
    EXPECT_GT(samples, 0);
    EXPECT_LE(samples, run.at("heads").at(0).at("samples").get<int64_t>() - 3 * 32);
    EXPECT_GT(seconds, 0);
    EXPECT_LT(seconds, run.at("train_seconds").get<double>());
    EXPECT_EQ(digests_by_actor(run, "data_parallel_worker"),
              digests_by_actor(shared_run(*dir_, with(job(2), {"--mode", "local"}), "w2-local"),
                               "data_parallel_worker"));
  }
  // Epochs shorter than a report's 20 steps: the first epoch is the warm-up
  // (its end is the first report), the second's steps after its first are
  // the steady part; a run of one such epoch has none.
  auto short_epochs = shared_run(*dir_, job(2, "25"), "w2-embedded");
  ASSERT_TRUE(short_epochs.contains("steady"));
  EXPECT_GT(short_epochs.at("steady").at("samples").get<int64_t>(), 0);
  EXPECT_LE(short_epochs.at("steady").at("samples").get<int64_t>(),
            short_epochs.at("heads").at(0).at("samples").get<int64_t>() / 2);
  EXPECT_FALSE(
    run_job(*dir_, with(job(2), {"--set", "data.epochs=1"}), "one-epoch").contains("steady"));
}

// Linear lr scaling with warmup (Goyal et al.): every worker computes the
// same scheduled lr per step, as the reference does.
TEST_F(data_parallel_run, scaled_and_warmed_up_lr_equals_the_local_reference) {
  auto scaled = with(job(2), {"--set", "data_parallel.optimizer.lr_scaling=linear", "--set",
                              "data_parallel.optimizer.base_batch=64", "--set",
                              "data_parallel.optimizer.warmup_epochs=1.5"});
  auto local = run_job(*dir_, with(scaled, {"--mode", "local"}), "scaled-local");
  auto actors = run_job(*dir_, scaled, "scaled-embedded");
  ASSERT_EQ(digests_by_actor(local, "data_parallel_worker").size(), 2u);
  EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker"),
            digests_by_actor(local, "data_parallel_worker"));
  // And the schedule changes the result: the test can fail.
  EXPECT_NE(digests_by_actor(local, "data_parallel_worker"),
            digests_by_actor(shared_run(*dir_, with(job(2), {"--mode", "local"}), "w2-local"),
                             "data_parallel_worker"));
}

// AdamW from the workload's optimizer section, with a cosine schedule after
// a warm-up and clip_grad_norm: every worker takes the same step, so the
// ring's workers equal the reference bit for bit, and node processes (the
// role settings carry the optimizer) equal them too.
TEST_F(data_parallel_run, adamw_with_a_cosine_schedule_equals_the_local_reference) {
  // configs/adamw.yaml (AdamW, cosine after a warm-up epoch) made small, clipping;
  // synthetic samples are not images: no augmentation. The convnet instead of the
  // config's 20 M-parameter mlp (which configs_test trains with AdamW): 6 runs of
  // it took 48 s of the suite.
  const std::vector<std::string> adamw{
    "run",   source_path("configs/adamw.yaml"), "--set", "data.augment={}",
    "--set", "data.dataset=synthetic",
    "--set", "data.synthetic_train=200",        "--set", "data.synthetic_test=64",
    "--set", "data.batch_size=16",              "--set", "data.epochs=2",
    "--set", "data_parallel.model=convnet",
    "--set", "runtime.compute_threads=1",       "--set", "optimizer.clip_grad_norm=1"};
  auto local = run_job(*dir_, with(adamw, {"--mode", "local"}), "adamw-local");
  auto reference = digests_by_actor(local, "data_parallel_worker");
  ASSERT_EQ(reference.size(), 2u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, adamw, "adamw-embedded"), "data_parallel_worker"),
            reference);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(adamw, {"--local-nodes", "2"}), "adamw-nodes"),
                             "data_parallel_worker"),
            reference);
  // Local SGD: each worker keeps its own moments; still the reference's bits.
  auto local_sgd = with(adamw, {"--set", "data_parallel.sync_every=2"});
  EXPECT_EQ(digests_by_actor(run_job(*dir_, local_sgd, "adamw-local-sgd"), "data_parallel_worker"),
            digests_by_actor(run_job(*dir_, with(local_sgd, {"--mode", "local"}),
                                     "adamw-local-sgd-local"),
                             "data_parallel_worker"));
  // And the schedule changes the result: the test can fail.
  EXPECT_NE(reference, digests_by_actor(run_job(*dir_, with(adamw, {"--mode", "local", "--set",
                                                                    "optimizer.schedule=constant",
                                                                    "--set",
                                                                    "optimizer.warmup_epochs=0"}),
                                                "adamw-constant"),
                                        "data_parallel_worker"));
}

namespace {

/// The largest difference between the parameters of two saved models
/// (TorchScript files of the same model).
double saved_difference(const std::string& a, const std::string& b) {
  auto x = torch::jit::load(a), y = torch::jit::load(b);
  std::vector<at::Tensor> xs, ys;
  for (const auto& p : x.named_parameters())
    xs.push_back(p.value);
  for (const auto& p : y.named_parameters())
    ys.push_back(p.value);
  EXPECT_EQ(xs.size(), ys.size());
  EXPECT_FALSE(xs.empty());
  double worst = 0;
  for (size_t i = 0; i < xs.size() && i < ys.size(); ++i)
    worst = std::max(worst, (xs[i] - ys[i]).abs().max().item<double>());
  return worst;
}

} // namespace

// data.validation, data.augment, save: best and early_stopping (issue 35)
// on configs/adamw.yaml made small (real Fashion-MNIST: augmentation takes
// images): worker 0 evaluates the validation samples the reference holds
// out, every worker augments its share as the reference does, the ring
// ends with the reference's weights, and --save-model writes the same best
// epoch (the coordinator keeps worker 0's per-epoch weights).
TEST_F(data_parallel_run, validation_augmentation_and_early_stopping_equal_the_local_reference) {
  const std::vector<std::string> small{
    "run",   source_path("configs/adamw.yaml"),     "--set", "data.train_limit=320",
    "--set", "data.test_limit=64",                  "--set", "data.batch_size=16",
    "--set", "data.epochs=3",                       "--set", "data.validation=0.25",
    "--set", "data.augment={crop: 2, flip: true}",  "--set", "data_parallel.model=convnet",
    "--set", "runtime.compute_threads=1"};
  const auto runs = run_both_saving(*dir_, small, "best");
  auto reference = digests_by_actor(runs.local, "data_parallel_worker");
  ASSERT_EQ(reference.size(), 2u);
  EXPECT_EQ(digests_by_actor(runs.actors, "data_parallel_worker"), reference);
  expect_same_best_epoch(runs.actors, runs.local, 3);
  EXPECT_EQ(saved_difference(runs.actors_model, runs.local_model), 0.0);
  // Without augmentation another run: the test can fail.
  EXPECT_NE(digests_by_actor(run_job(*dir_,
                                     with(small, {"--mode", "local", "--set",
                                                  "data.augment={crop: 0, flip: false}"}),
                                     "unaugmented-local"),
                             "data_parallel_worker"),
            reference);
  // early_stopping: an lr too small to change a prediction leaves the
  // validation accuracy where it was, so patience 1 ends both runs after
  // epoch 2 of 3, for the same reason.
  const auto stalled = with(small, {"--set", "optimizer.lr=1e-12", "--set",
                                    "early_stopping={patience: 1}"});
  for (const auto& run : {run_job(*dir_, with(stalled, {"--mode", "local"}), "stalled-local"),
                          run_job(*dir_, stalled, "stalled")}) {
    ASSERT_TRUE(run.contains("stopped")) << run.dump();
    EXPECT_EQ(run.at("stopped").at("reason"), "early_stopping");
    EXPECT_EQ(run.at("stopped").at("epoch"), 2);
    EXPECT_EQ(run.at("stopped").at("best_epoch"), 1);
    EXPECT_EQ(run.at("heads")[0].at("epochs").size(), 2u);
  }
}

TEST_F(data_parallel_run, node_processes_equal_embedded) {
  const auto& embedded = shared_run(*dir_, job(2), "w2-embedded");
  auto nodes = run_job(*dir_, with(job(2), {"--local-nodes", "2"}), "nodes");
  auto digests = digests_by_actor(embedded, "data_parallel_worker");
  ASSERT_EQ(digests.size(), 2u);
  EXPECT_EQ(digests_by_actor(nodes, "data_parallel_worker"), digests);
  EXPECT_EQ(digests.begin()->second, digests.rbegin()->second); // every worker alike
  // Bytes on the ring: per step and bucket, every chunk but two (W = 2: one
  // of two chunks), model::ring_bytes_sent; 2 epochs of 7 steps (100 / 16).
  baton::model::model_spec convnet;
  convnet.name = "convnet";
  auto layout = baton::model::make_flat_layout(data_parallel::make_worker_model(convnet));
  for (int32_t w = 0; w < 2; ++w) {
    int64_t per_step = 0;
    for (const auto& b : baton::model::make_buckets(layout, 25))
      per_step += baton::model::ring_bytes_sent(b.numel, 4, w, 2);
    int64_t bytes = -1;
    for (const auto& e : nodes.at("edges"))
      if (e.at("from") == "worker." + std::to_string(w))
        bytes = e.at("bytes").get<int64_t>();
    EXPECT_EQ(bytes, 14 * per_step) << nodes.at("edges").dump();
  }
}

// Buckets on the ring as the backward finishes them (overlap, the default)
// or after it: the same sums, so the same weights, over three node
// processes whose chunks of the next bucket arrive while a worker still
// reduces the one before; the overlapped run reports its overlap.
TEST_F(data_parallel_run, overlap_changes_no_bit) {
  auto overlapped = run_job(*dir_, with(job(3, "0.25"), {"--local-nodes", "3"}), "overlap-nodes");
  auto after = run_job(*dir_, with(job(3, "0.25"), {"--set", "data_parallel.overlap=false"}),
                       "no-overlap");
  auto digests = digests_by_actor(after, "data_parallel_worker");
  ASSERT_EQ(digests.size(), 3u);
  EXPECT_EQ(digests_by_actor(overlapped, "data_parallel_worker"), digests);
  for (const auto& a : overlapped.at("actors"))
    if (a.at("role") == "data_parallel_worker")
      EXPECT_GT(a.at("figures").at("overlap_seconds").get<double>(), 0) << a.at("name");
  for (const auto& a : after.at("actors"))
    if (a.at("role") == "data_parallel_worker")
      EXPECT_EQ(a.at("figures").at("overlap_seconds").get<double>(), 0) << a.at("name");
}

// Worker 0's final weights over 64 MiB (the 20 M-parameter mlp, 80 MB) were
// one message: over TCP (node processes without shared memory, as between
// hosts) the sender's codec refused it and --save-model failed after the
// whole run ("'worker.0' sent no final weights"). They go in parts now
// (actors/flow/tensor_parts.hpp): the model saved over node processes is the
// embedded run's, tensor for tensor.
TEST_F(data_parallel_run, a_model_over_a_message_is_saved_over_node_processes) {
  auto mlp = with(job(2), {"--set", "data_parallel.model=mlp", "--set", "data.epochs=1",
                           "--set", "data.synthetic_train=64"});
  const auto embedded = dir_->path() + "/mlp-embedded.pt";
  const auto nodes = dir_->path() + "/mlp-nodes.pt";
  auto one = run_baton(with(mlp, {"--save-model", embedded}));
  ASSERT_EQ(one.exit_code, 0) << one.text;
  auto two = run_baton(with(mlp, {"--local-nodes", "2", "--set", "runtime.shared_memory=false",
                                  "--save-model", nodes}));
  ASSERT_EQ(two.exit_code, 0) << two.text;
  EXPECT_FALSE(contains(two.text, "tensor_set")) << two.text;
  auto a = torch::jit::load(embedded);
  auto b = torch::jit::load(nodes);
  auto theirs = b.named_parameters();
  int64_t bytes = 0;
  for (const auto& p : a.named_parameters()) {
    bytes += p.value.numel() * p.value.element_size();
    bool same = false;
    for (const auto& q : theirs)
      same = same || (q.name == p.name && torch::equal(p.value, q.value));
    EXPECT_TRUE(same) << p.name;
  }
  EXPECT_GT(bytes, int64_t{64} << 20); // the case: more than one message
}

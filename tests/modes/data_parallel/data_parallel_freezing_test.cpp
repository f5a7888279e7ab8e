// job: data-parallel with local SGD (sync_every), a frozen prefix (fixed or
// adaptive, AutoFreeze), the feature cache and a pretrained backbone: the
// section's refusals with file:line, the worker settings, and real runs
// (embedded, node processes) against the local reference, digest for
// digest and decision for decision.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/worker_replica.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/core/checkpoint.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/dataset.hpp"
#include "model/core/digest.hpp"
#include "model/core/error.hpp"
#include "model/core/freezing.hpp"
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

/// The small data-parallel job of `model` with a backbone `checkpoint`
/// (line 6): `data_parallel.model` on line 12, the section's other keys
/// from line 13.
topology_fixture dp(const std::string& model = "convnet", const std::string& checkpoint = "none") {
  return data_parallel_topology("dp.yaml", model, checkpoint);
}

/// Worker 2's settings of the plan of `section` (W = 3), through its codec.
data_parallel::worker_settings planned_worker(const std::string& section) {
  return last_planned_worker(dp(), "  workers: 3\n" + section, 3);
}

} // namespace

// -- the section --------------------------------------------------------------------

TEST(data_parallel_freezing_section, a_bad_up_to_names_the_line_and_the_valid_layers) {
  auto text = dp().refusal("  freeze: {up_to: pool9}\n");
  EXPECT_TRUE(contains(text, "dp.yaml:13")) << text;
  EXPECT_TRUE(contains(text, "pool9")) << text;
  EXPECT_TRUE(contains(text, "conv1, relu1, conv2")) << text;
  EXPECT_FALSE(contains(text, "fc2")) << text; // the classifier is never frozen
}

TEST(data_parallel_freezing_section, refuses_what_the_reference_refuses_with_file_and_line) {
  // Adaptive freezing decides on every step's reduced gradients.
  auto local_sgd = dp().refusal("  sync_every: 2\n  freeze: {policy: adaptive}\n");
  EXPECT_TRUE(contains(local_sgd, "dp.yaml:14")) << local_sgd;
  EXPECT_TRUE(contains(local_sgd, "sync_every")) << local_sgd;
  // The mlp's bn1 normalises over the batch: its output cannot be cached.
  auto batch = dp("mlp").refusal("  freeze: {up_to: relu1, cache: memory}\n");
  EXPECT_TRUE(contains(batch, "dp.yaml:13")) << batch;
  EXPECT_TRUE(contains(batch, "bn1")) << batch;
  EXPECT_TRUE(dp("mlp").parse("  freeze: {up_to: fc1, cache: memory}\n")); // before bn1
  auto adaptive_batch = dp("mlp").refusal("  freeze: {policy: adaptive, cache: memory}\n");
  EXPECT_TRUE(contains(adaptive_batch, "bn1")) << adaptive_batch;
  for (const char* bad :
       {"  freeze: {}\n", "  freeze: {up_to: pool1, interval: 5}\n",
        "  freeze: {policy: adaptive, up_to: pool1}\n",
        "  freeze: {policy: adaptive, groups: [pool2, pool1]}\n",
        "  freeze: {policy: adaptive, groups: [pool1, fc2]}\n",
        "  freeze: {policy: adaptive, max_frozen: conv1}\n",
        "  freeze: {policy: adaptive, percentile: 101}\n",
        "  freeze: {policy: adaptive, interval: 0}\n", "  freeze: {policy: sometimes}\n",
        "  freeze: {up_to: pool1, cache: disk}\n", "  freeze: {up_to: pool1, cache_mb: 0}\n",
        "  freeze: {up_to: pool1, colour: blue}\n", "  sync_every: -1\n", "  task: nine\n"}) {
    auto text = dp().refusal(bad);
    EXPECT_TRUE(contains(text, "dp.yaml:13")) << bad << " -> " << text;
  }
  // A pretrained backbone: the mlp has none to load.
  auto mlp = dp("mlp", "pre.pt").refusal("");
  EXPECT_TRUE(contains(mlp, "dp.yaml:6")) << mlp;
}

TEST(data_parallel_freezing_section, the_workers_get_the_settings) {
  auto fixed = planned_worker("  sync_every: 4\n  freeze: {up_to: pool2, cache: memory, "
                              "cache_mb: 8}\n");
  EXPECT_EQ(fixed.sync_every, 4);
  EXPECT_EQ(fixed.freeze_up_to, "pool2");
  EXPECT_TRUE(fixed.freeze_groups.empty());
  EXPECT_TRUE(fixed.cache);
  EXPECT_EQ(fixed.cache_mb, 8);
  auto adaptive = planned_worker("  freeze: {policy: adaptive, interval: 7, percentile: 30, "
                                 "max_frozen: pool3}\n");
  EXPECT_EQ(adaptive.freeze_groups,
            (std::vector<std::string>{"pool1", "pool2", "pool3", "relu6"}));
  EXPECT_EQ(adaptive.adaptive.interval, 7);
  EXPECT_EQ(adaptive.adaptive.percentile, 30);
  EXPECT_EQ(adaptive.adaptive.max_frozen, 3);
  EXPECT_TRUE(adaptive.freeze_up_to.empty());
  EXPECT_FALSE(adaptive.cache);
  EXPECT_EQ(planned_worker("").sync_every, 0);
  EXPECT_TRUE(planned_worker("").freeze_up_to.empty());
}

TEST(data_parallel_freezing_section, garbage_worker_settings_are_bad_config) {
  auto spec = planned_worker("  freeze: {policy: adaptive}\n");
  const auto good = to_yaml(spec);
  auto replaced = [&](const std::string& from, const std::string& to) {
    auto text = good;
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  expect_bad_config(data_parallel::parse_worker_settings,
                    {replaced("interval: 50", "interval: 0"),
                     replaced("sync_every: 0", "sync_every: 2"), // adaptive + local SGD
                     replaced("percentile: 50", "percentile: often"),
                     replaced("sync_every: 0", "sync_every: -3")});
}

// -- the replicas without actors ----------------------------------------------------

namespace {

/// W worker_replica objects trained as the worker actors train them (ring
/// sums, mean, step, adaptive decision; local SGD's averages), one epoch
/// of `spec`'s shares; returns replica 0's weights digest.
std::string train_replicas(const data_parallel::worker_settings& spec,
                           const baton::model::dataset& train) {
  namespace m = baton::model;
  std::vector<worker_replica> replicas;
  for (int32_t w = 0; w < spec.workers; ++w)
    replicas.emplace_back(data_parallel::make_worker_model(spec.model), spec);
  // Each bucket's mean over the workers, as the ring leaves it.
  auto mean_over = [&](const std::vector<std::vector<at::Tensor>>& per_worker) {
    std::vector<at::Tensor> means;
    for (size_t b = 0; b < per_worker.front().size(); ++b) {
      std::vector<at::Tensor> inputs;
      for (const auto& vectors : per_worker)
        inputs.push_back(vectors[b]);
      means.push_back(m::mean_of_sum(m::ring_allreduce(inputs), spec.workers));
    }
    return means;
  };
  std::vector<std::vector<std::vector<int64_t>>> batches;
  for (int32_t w = 0; w < spec.workers; ++w)
    batches.push_back(m::worker_minibatches(
      m::worker_share(train.size(), spec.data.plan.seed, 0, w, spec.workers,
                      m::remainder_policy::pad),
      spec.data.plan.batch_size));
  const double lr = spec.optimizer.lr;
  int32_t local = 0;
  for (size_t k = 0; k < batches.front().size(); ++k) {
    std::vector<std::vector<at::Tensor>> per_worker;
    for (int32_t w = 0; w < spec.workers; ++w) {
      double loss = 0;
      auto grads = replicas[w].gradients(train, batches[w][k], 0, loss);
      if (spec.sync_every > 0)
        replicas[w].step(grads, lr);
      else
        per_worker.push_back(replicas[w].bucket_vectors(grads));
    }
    if (spec.sync_every == 0) {
      const auto means = mean_over(per_worker);
      for (auto& r : replicas) {
        const auto reduced = r.per_key(means);
        r.step(reduced, lr);
        r.adapt(static_cast<int64_t>(k), reduced);
      }
    }
    if (spec.sync_every > 0 && (++local == spec.sync_every || k + 1 == batches.front().size())) {
      local = 0;
      std::vector<std::vector<at::Tensor>> weights;
      for (auto& r : replicas)
        weights.push_back(r.bucket_vectors(r.parameters()));
      const auto means = mean_over(weights);
      for (auto& r : replicas)
        r.set_parameters(r.per_key(means));
    }
  }
  for (const auto& r : replicas)
    EXPECT_EQ(r.decisions().size(), replicas.front().decisions().size());
  return m::weights_digest(replicas.front().model());
}

} // namespace

// W = 3 replicas (uneven ring chunks, small buckets) stepped as the actors
// step them end with the reference's weights: adaptive freezing with the
// cache, a fixed prefix with local SGD.
TEST(worker_replica, replicas_equal_the_local_reference) {
  namespace m = baton::model;
  const auto train = m::make_synthetic(150, 1, 28, 28, 10, 11);
  data_parallel::worker_settings spec;
  spec.workers = 3;
  spec.model.name = "convnet";
  spec.model.classes = 10;
  spec.data.plan.batch_size = 8;
  spec.data.plan.seed = 5;
  spec.optimizer.lr = 0.05;
  spec.optimizer.momentum = 0.9;
  spec.bucket_mb = 0.25;
  for (bool adaptive : {true, false}) {
    spec.freeze_groups = adaptive ? std::vector<std::string>{"pool1", "pool2", "pool3"}
                                  : std::vector<std::string>{};
    spec.adaptive.interval = 2;
    spec.adaptive.percentile = 80;
    spec.freeze_up_to = adaptive ? "" : "pool1";
    spec.sync_every = adaptive ? 0 : 2;
    spec.cache = adaptive;
    m::data_parallel_settings reference;
    reference.workers = spec.workers;
    reference.batch_size = spec.data.plan.batch_size;
    reference.epochs = 1;
    reference.seed = spec.data.plan.seed;
    reference.optimizer = spec.optimizer;
    reference.bucket_mb = spec.bucket_mb;
    reference.sync_every = spec.sync_every;
    reference.freeze_up_to = spec.freeze_up_to;
    reference.freeze_groups = spec.freeze_groups;
    reference.adaptive = spec.adaptive;
    reference.cache = spec.cache;
    const auto result = m::run_data_parallel_local(
      [&] { return data_parallel::make_worker_model(spec.model); }, train, m::dataset{}, reference);
    if (adaptive) {
      EXPECT_GT(result.frozen_layers, 0u); // it froze: the test can fail
    }
    EXPECT_EQ(train_replicas(spec, train), result.weights_digest) << "adaptive " << adaptive;
  }
}

// Two replicas that share their weights (share()), each stepping a half of
// every key with the two workers' gradients (step_of_two), end each step
// with the weights and momentum of a replica that steps its own copy with
// the ring's buckets (step_of_mean), bit for bit.
TEST(worker_replica, two_sharing_their_weights_step_as_one_that_steps_all) {
  namespace m = baton::model;
  const auto train = m::make_synthetic(48, 1, 28, 28, 10, 3);
  data_parallel::worker_settings spec;
  spec.workers = 2;
  spec.model.name = "convnet";
  spec.model.classes = 10;
  spec.optimizer.lr = 0.05;
  spec.optimizer.momentum = 0.9;
  spec.optimizer.weight_decay = 1e-3;
  spec.bucket_mb = 0.25;
  worker_replica first(data_parallel::make_worker_model(spec.model), spec);
  worker_replica second(data_parallel::make_worker_model(spec.model), spec);
  worker_replica alone(data_parallel::make_worker_model(spec.model), spec);
  ASSERT_TRUE(first.steps_in_parts());
  second.share(first.stepped_tensors());
  const auto shared = first.stepped_tensors();
  const auto seconds = second.stepped_tensors();
  for (size_t i = 0; i < shared.size(); ++i)
    ASSERT_EQ(seconds[i].data_ptr(), shared[i].data_ptr()) << i;
  double loss = 0;
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<int64_t> ids0, ids1;
    for (int64_t k = 0; k < 8; ++k) {
      ids0.push_back(16 * step + k);
      ids1.push_back(16 * step + 8 + k);
    }
    const auto grads0 = first.gradients(train, ids0, 0, loss);
    const auto grads1 = second.gradients(train, ids1, 0, loss);
    // The replica alone: the two workers' buckets swapped over a ring.
    data_parallel::ring_exchange ring0(0, 2), ring1(1, 2);
    ring0.start(alone.bucket_sizes());
    ring1.start(alone.bucket_sizes());
    auto flats0 = alone.bucket_vectors(grads0);
    auto flats1 = alone.bucket_vectors(grads1);
    for (size_t b = 0; b < flats0.size(); ++b) {
      for (auto& msg : ring0.put(b, flats0[b]))
        ring1.receive(std::move(msg));
      for (auto& msg : ring1.put(b, flats1[b]))
        ring0.receive(std::move(msg));
    }
    ASSERT_TRUE(ring0.done() && ring1.done());
    alone.step_of_mean(ring0.own(), ring0.others(), 0.05);
    first.step_of_two(grads0, grads1, 0.05, 0, 2);
    second.step_of_two(grads1, grads0, 0.05, 1, 2);
    const auto together = first.stepped_tensors();
    const auto apart = alone.stepped_tensors();
    for (size_t i = 0; i < together.size(); ++i)
      ASSERT_TRUE(at::equal(together[i], apart[i])) << "tensor " << i << ", step " << step;
    EXPECT_EQ(m::weights_digest(second.model()), m::weights_digest(alone.model()));
  }
  // Gradients of another model, and a model of other shapes, are refused.
  const auto one = first.gradients(train, {0, 1}, 0, loss);
  EXPECT_THROW(first.step_of_two(one, {}, 0.05, 0, 2), baton::model::error);
  data_parallel::worker_settings mlp = spec;
  mlp.model.name = "mlp";
  worker_replica other(data_parallel::make_worker_model(mlp.model), mlp);
  EXPECT_THROW(other.share(first.stepped_tensors()), baton::model::error);
}

// -- runs against the local reference ------------------------------------------------

namespace {

class data_parallel_freezing_run : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<scratch_dir>("data-parallel-freezing");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/data-parallel.yaml made small: synthetic data, 2 workers,
  /// 2 epochs of 7 steps (200 samples, 100 per worker, 16 per step).
  static std::vector<std::string> job(const std::vector<std::string>& sets = {}) {
    std::vector<std::string> args{"run",   source_path("configs/data-parallel.yaml"),
                                  "--set", "data.dataset=synthetic",
                                  "--set", "data.synthetic_train=200",
                                  "--set", "data.synthetic_test=64",
                                  "--set", "data.batch_size=16",
                                  "--set", "data.epochs=2",
                                  "--set", "data_parallel.model=convnet",
                                  "--set", "data_parallel.workers=2",
                                  "--set", "runtime.compute_threads=1"};
    for (const auto& s : sets)
      args.insert(args.end(), {"--set", s});
    return args;
  }

  /// The reference's and the actors' digests, which must be equal (and
  /// the same on every worker); returns the actors' metrics.
  static nlohmann::json expect_reference(const std::vector<std::string>& sets,
                                         const std::string& tag) {
    auto local = run_job(*dir_, with(job(sets), {"--mode", "local"}), tag + "-local");
    auto actors = run_job(*dir_, job(sets), tag + "-embedded");
    auto reference = digests_by_actor(local, "data_parallel_worker");
    EXPECT_EQ(reference.size(), 2u) << tag;
    EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker"), reference) << tag;
    return actors;
  }

  /// The actor `name`'s entry of the metrics.
  static nlohmann::json actor(const nlohmann::json& metrics, const std::string& name) {
    for (const auto& a : metrics.at("actors"))
      if (a.at("name") == name)
        return a;
    ADD_FAILURE() << "no actor " << name << " in " << metrics.dump();
    return nlohmann::json::object();
  }

  /// Bytes worker w sent to its successor.
  static int64_t ring_bytes(const nlohmann::json& metrics, int32_t w) {
    for (const auto& e : metrics.at("edges"))
      if (e.at("from") == "worker." + std::to_string(w))
        return e.at("bytes").get<int64_t>();
    return -1;
  }

  /// The convnet a worker trains (10 classes), from the seeded weights.
  static baton::model::layered_model convnet() {
    baton::model::model_spec spec;
    spec.name = "convnet";
    spec.classes = 10;
    return data_parallel::make_worker_model(spec);
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// Local SGD: each worker steps on its own, the weights averaged over the
// ring every 2 steps and at each epoch's end (7 steps: 4 averages).
TEST_F(data_parallel_freezing_run, local_sgd_equals_the_local_reference) {
  auto actors = expect_reference({"data_parallel.sync_every=2"}, "sync2");
  // Weights on the ring, not gradients, 4 times an epoch instead of 7.
  const auto layout = baton::model::make_flat_layout(convnet());
  int64_t per_exchange = 0;
  for (const auto& b : baton::model::make_buckets(layout, 25))
    per_exchange += baton::model::ring_bytes_sent(b.numel, 4, 0, 2);
  EXPECT_EQ(ring_bytes(actors, 0), 2 * 4 * per_exchange);
  // And local SGD is not BSP: the test can fail.
  auto bsp = run_job(*dir_, with(job(), {"--mode", "local"}), "bsp-local");
  EXPECT_NE(digests_by_actor(bsp, "data_parallel_worker"),
            digests_by_actor(actors, "data_parallel_worker"));
}

// A fixed prefix from a pretrained backbone: the frozen layers keep the
// pretrained weights, none of their bytes cross the ring, the classifier
// starts fresh and is trained.
TEST_F(data_parallel_freezing_run, fixed_freeze_from_a_pretrained_backbone) {
  const std::string pretrained = dir_->path() + "/pretrained.pt";
  // `baton pretrain` reads the same topology (backbone.pretrain) and writes
  // the whole model's checkpoint.
  auto args = job({"backbone.checkpoint=" + pretrained, "backbone.pretrain.train_limit=128",
                   "backbone.pretrain.epochs=1"});
  args.front() = "pretrain";
  auto written = run_baton(args);
  ASSERT_EQ(written.exit_code, 0) << written.text;

  const std::vector<std::string> sets{"backbone.checkpoint=" + pretrained,
                                      "data_parallel.freeze={up_to: pool2}"};
  const std::string saved = dir_->path() + "/fine-tuned.pt";
  auto actors = expect_reference(sets, "fixed");
  run_job(*dir_, with(job(sets), {"--save-model", saved}), "fixed-saved");
  auto start = convnet(), end = convnet();
  baton::model::load_checkpoint(start, pretrained); // the backbone and the pretraining's fc2
  baton::model::load_checkpoint(end, saved);
  const auto point = baton::model::freeze_point(start, "pool2");
  EXPECT_EQ(baton::model::weights_digest(end.slice(0, point)),
            baton::model::weights_digest(start.slice(0, point)));
  EXPECT_NE(baton::model::weights_digest(end.slice(point, end.size() - 1)),
            baton::model::weights_digest(start.slice(point, start.size() - 1)));
  EXPECT_EQ(actor(actors, "worker.1").at("figures").at("frozen_layers"), point);
  // Only the trainable keys' buckets cross the ring: 2 epochs of 7 steps.
  const auto layout = baton::model::make_flat_layout(start, point);
  for (int32_t w = 0; w < 2; ++w) {
    int64_t per_step = 0;
    for (const auto& b : baton::model::make_buckets(layout, 25))
      per_step += baton::model::ring_bytes_sent(b.numel, 4, w, 2);
    EXPECT_EQ(ring_bytes(actors, w), 14 * per_step);
    EXPECT_EQ(per_step, baton::model::ring_bytes_sent(layout.trainable().size(), 4, w, 2));
  }
}

// AutoFreeze: every worker takes the reference's decisions at the same
// steps (from the same all-reduced gradients), and freezes for real.
TEST_F(data_parallel_freezing_run, adaptive_freezing_takes_the_reference_decisions) {
  const std::vector<std::string> sets{
    "data_parallel.freeze={policy: adaptive, interval: 3, percentile: 80}"};
  auto actors = expect_reference(sets, "adaptive");
  auto local = run_job(*dir_, with(job(sets), {"--mode", "local"}), "adaptive-local-again");
  const auto decisions = actor(local, "worker.0").at("events");
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(actor(actors, "worker.0").at("events"), decisions);
  EXPECT_EQ(actor(actors, "worker.1").at("events"), decisions);
  EXPECT_GT(decisions.back().at("frozen_after").get<int>(), 0) << decisions.dump();
  EXPECT_GT(actor(actors, "worker.0").at("figures").at("frozen_layers").get<double>(), 0);
}

// DESIGN invariant 9: the cache changes no bit, fixed or adaptive, and
// answers from the second epoch on.
TEST_F(data_parallel_freezing_run, the_cache_equals_recomputation_bit_for_bit) {
  for (const std::string& freeze : {std::string{"{up_to: pool2"},
                                    std::string{"{policy: adaptive, interval: 3, "
                                                "percentile: 80"}}) {
    auto cached = run_job(*dir_, job({"data_parallel.freeze=" + freeze + ", cache: memory}"}),
                          "cached");
    auto recomputed =
      run_job(*dir_, job({"data_parallel.freeze=" + freeze + ", cache: none}"}), "recomputed");
    auto digests = digests_by_actor(cached, "data_parallel_worker");
    ASSERT_EQ(digests.size(), 2u);
    EXPECT_EQ(digests, digests_by_actor(recomputed, "data_parallel_worker")) << freeze;
    const auto figures = actor(cached, "worker.0").at("figures");
    EXPECT_GT(figures.at("cache_hits").get<double>(), 0) << figures.dump();
    EXPECT_GT(figures.at("cache_bytes").get<double>(), 0) << figures.dump();
    EXPECT_FALSE(actor(recomputed, "worker.0").at("figures").contains("cache_hits"));
  }
}

// DESIGN invariant 7: over two node processes, the same weights.
TEST_F(data_parallel_freezing_run, node_processes_equal_embedded) {
  const std::vector<std::string> sets{"data_parallel.freeze={up_to: pool2, cache: memory}"};
  auto embedded = run_job(*dir_, job(sets), "frozen-embedded");
  auto nodes = run_job(*dir_, with(job(sets), {"--local-nodes", "2"}), "frozen-nodes");
  auto digests = digests_by_actor(embedded, "data_parallel_worker");
  ASSERT_EQ(digests.size(), 2u);
  EXPECT_EQ(digests_by_actor(nodes, "data_parallel_worker"), digests);
  EXPECT_EQ(ring_bytes(nodes, 0), ring_bytes(embedded, 0));
  // The freezing and cache figures (the time split differs run to run, and
  // only node processes spend CPU on messages that cross them).
  auto counts = [](nlohmann::json figures) {
    for (const char* timing :
         {"forward_seconds", "backward_seconds", "exchange_wait_seconds", "step_seconds",
          "overlap_seconds", "evaluate_seconds", "serialisation_cpu_seconds",
          "wire_cpu_seconds"})
      figures.erase(timing);
    return figures;
  };
  EXPECT_EQ(counts(actor(nodes, "worker.1").at("figures")),
            counts(actor(embedded, "worker.1").at("figures")));
}

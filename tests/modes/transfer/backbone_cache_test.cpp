// The transfer job's feature cache (`backbone.cache: memory`), as a user
// runs it: real `baton` processes on a few hundred Fashion-MNIST samples.
// DESIGN invariant 9: a run that reads frozen features from the cache ends
// with the weights of the same run that recomputes them, bit for bit, in the
// actors and in `--mode local`; from its second epoch on the cached backbone
// runs zero times per sample; a cache too small for the data set recomputes
// the rest and still gives the same weights; bad keys name file and line.

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

constexpr int64_t train_samples = 640;
constexpr int64_t test_samples = 160;

/// Three epochs of two heads on one frozen (initial-weight) backbone in one
/// stage, its features in canonical blocks of 8 rows; `backbone_extra` adds
/// keys to the backbone section.
std::string topology(const std::string& backbone_extra) {
  return "job: transfer\n"
         "seed: 11\n"
         "data: {dataset: fashion-mnist, train_limit: " + std::to_string(train_samples) +
         ", test_limit: " + std::to_string(test_samples) +
         ", batch_size: 32, microbatches: 2, epochs: 3}\n"
         "backbone:\n"
         "  model: convnet\n"
         "  checkpoint: none\n"
         "  split: []\n"
         "  feature_block: 8\n" + backbone_extra +
         "tasks:\n"
         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
         "  - {name: footwear, labels: [0, 0, 0, 0, 0, 1, 0, 1, 0, 1]}\n"
         "heads:\n"
         "  - {name: all10, task: all10, optimizer: {lr: 0.05, momentum: 0.9}}\n"
         "  - {name: footwear, task: footwear, optimizer: {lr: 0.05, momentum: 0.9}}\n"
         // One torch thread everywhere (--mode local: --threads 1): a kernel may
         // round differently with another thread count, cache or not.
         "runtime: {compute_threads: 1, head_threads: 1}\n";
}

/// `--mode local` with one torch thread, as every actor has.
const std::vector<std::string> local_mode{"--mode", "local", "--threads", "1"};

/// The actor of `metrics` that ran the backbone (the stage; "backbone" in
/// --mode local).
nlohmann::json backbone_actor(const nlohmann::json& metrics) {
  for (const auto& a : metrics.at("actors"))
    if (a.at("role") == "stage")
      return a;
  ADD_FAILURE() << "no stage in " << metrics.dump();
  return nlohmann::json::object();
}

/// The per-epoch counts the backbone's actor reported, in epoch order.
std::vector<nlohmann::json> epochs_of(const nlohmann::json& actor) {
  std::vector<nlohmann::json> out;
  for (const auto& e : actor.value("events", nlohmann::json::array()))
    if (e.value("event", "") == "backbone_epoch")
      out.push_back(e);
  return out;
}

int64_t figure(const nlohmann::json& actor, const std::string& name) {
  return static_cast<int64_t>(actor.at("figures").at(name).get<double>());
}

class backbone_cache : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("backbone-cache"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// Writes `text` to NAME.yaml in the suite's directory; returns its path.
  static std::string write(const std::string& name, const std::string& text) {
    auto path = dir_->path() + "/" + name + ".yaml";
    std::ofstream{path} << text;
    return path;
  }

  /// `baton run` of topology(backbone_extra) with `more` flags; its metrics.
  static nlohmann::json run(const std::string& name, const std::string& backbone_extra,
                            const std::vector<std::string>& more = {}) {
    return run_job(*dir_, with({"run", write(name, topology(backbone_extra))}, more), name);
  }

  /// Results shared by several tests (each run once).
  static const nlohmann::json& cached_embedded() {
    static const nlohmann::json m = run("cached-embedded", "  cache: memory\n");
    return m;
  }
  static const nlohmann::json& cached_local() {
    static const nlohmann::json m =
      run("cached-local", "  cache: memory\n", local_mode);
    return m;
  }
  static const nlohmann::json& uncached_embedded() {
    static const nlohmann::json m = run("uncached-embedded", "  cache: none\n");
    return m;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

/// Expects the run's exit code 2 and an error at `path`:`line` saying `what`.
void expect_refused(const std::string& path, int line, const std::string& what) {
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":" + std::to_string(line)), std::string::npos) << out.text;
  EXPECT_NE(out.text.find(what), std::string::npos) << out.text;
}

} // namespace

// DESIGN invariant 9, with the same K: cache == no cache, embedded and in
// --mode local (which is also == embedded), and over node processes (the
// sample ids cross the wire with the microbatches).
TEST_F(backbone_cache, cache_equals_no_cache_bit_for_bit) {
  const auto reference = digests_by_actor(uncached_embedded(), "head");
  ASSERT_EQ(reference.size(), 2u);
  EXPECT_EQ(digests_by_actor(cached_embedded(), "head"), reference);
  EXPECT_EQ(digests_by_actor(cached_local(), "head"), reference);
  auto uncached_local = run("uncached-local", "  cache: none\n", local_mode);
  EXPECT_EQ(digests_by_actor(uncached_local, "head"), reference);
  auto nodes = run("cached-nodes", "  cache: memory\n", {"--local-nodes", "2"});
  EXPECT_EQ(digests_by_actor(nodes, "head"), reference);
  const auto stage = backbone_actor(nodes);
  EXPECT_EQ(figure(stage, "backbone_train_computed"), train_samples) << stage.dump();
}

// From the second epoch on, the backbone runs zero times per training (and
// test) sample: every row comes from the cache. Without the cache it runs
// once per sample every epoch.
TEST_F(backbone_cache, from_the_second_epoch_the_backbone_runs_zero_times) {
  for (const auto* metrics : {&cached_embedded(), &cached_local()}) {
    const auto stage = backbone_actor(*metrics);
    const auto epochs = epochs_of(stage);
    ASSERT_EQ(epochs.size(), 3u) << stage.dump();
    EXPECT_EQ(epochs[0].at("train_samples"), train_samples);
    EXPECT_EQ(epochs[0].at("train_computed"), train_samples);
    EXPECT_EQ(epochs[0].at("eval_computed"), test_samples);
    for (size_t e = 1; e < epochs.size(); ++e) {
      SCOPED_TRACE("epoch " + std::to_string(e));
      EXPECT_EQ(epochs[e].at("train_samples"), train_samples);
      EXPECT_EQ(epochs[e].at("train_computed"), 0);
      EXPECT_EQ(epochs[e].at("eval_samples"), test_samples);
      EXPECT_EQ(epochs[e].at("eval_computed"), 0);
      EXPECT_EQ(epochs[e].at("forward_rows"), 0);
    }
    EXPECT_EQ(figure(stage, "cache_entries"), train_samples + test_samples);
    EXPECT_EQ(figure(stage, "cache_misses"), train_samples + test_samples);
    EXPECT_EQ(figure(stage, "cache_hits"), 2 * (train_samples + test_samples));
    // 256 float features a row.
    EXPECT_EQ(figure(stage, "cache_bytes"), (train_samples + test_samples) * 256 * 4);
  }
  const auto epochs = epochs_of(backbone_actor(uncached_embedded()));
  ASSERT_EQ(epochs.size(), 3u);
  for (const auto& e : epochs)
    EXPECT_EQ(e.at("train_computed"), train_samples) << e.dump();
}

// A budget of 400 rows (1 KiB each) for 800 samples: the rows past it are
// recomputed every epoch, and the weights are still those of the run
// without a cache.
TEST_F(backbone_cache, a_small_cache_recomputes_the_overflow_and_still_matches) {
  const std::string small = "  cache: memory\n  cache_mb: 0.390625\n"; // 400 KiB
  auto embedded = run("small-embedded", small);
  auto local = run("small-local", small, local_mode);
  const auto reference = digests_by_actor(uncached_embedded(), "head");
  EXPECT_EQ(digests_by_actor(embedded, "head"), reference);
  EXPECT_EQ(digests_by_actor(local, "head"), reference);
  for (const auto* metrics : {&embedded, &local}) {
    const auto stage = backbone_actor(*metrics);
    EXPECT_EQ(figure(stage, "cache_entries"), 400) << stage.dump();
    EXPECT_GT(figure(stage, "cache_rejected"), 0);
    const auto epochs = epochs_of(stage);
    ASSERT_EQ(epochs.size(), 3u);
    // Epoch 0 stores the first 400 training rows it computes; the test
    // split no longer fits.
    for (size_t e = 1; e < epochs.size(); ++e) {
      EXPECT_EQ(epochs[e].at("train_computed"), train_samples - 400) << epochs[e].dump();
      EXPECT_EQ(epochs[e].at("eval_computed"), test_samples) << epochs[e].dump();
    }
  }
}

// Bad values name the file and the line of the key.
TEST_F(backbone_cache, bad_values_name_file_and_line) {
  // topology(): line 4 is "backbone:", 8 feature_block, 9 the extra keys.
  expect_refused(write("disk", topology("  cache: disk\n")), 9, "one of");
  std::string zero = topology("  cache: memory\n");
  zero.replace(zero.find("feature_block: 8"), 16, "feature_block: 0");
  expect_refused(write("zero-block", zero), 8, "'backbone.feature_block' >= 1");
  std::string no_block = topology("  cache: memory\n");
  no_block.replace(no_block.find("  feature_block: 8\n"), 19, "");
  expect_refused(write("no-block", no_block), 8, "'backbone.feature_block' >= 1");
  expect_refused(write("negative-mb", topology("  cache: memory\n  cache_mb: -1\n")), 10,
                 "a number of MiB");
  std::string split = topology("  cache: memory\n");
  split.replace(split.find("split: []"), 9, "split: [pool1]");
  expect_refused(write("split", split), 9, "cuts it into 2 stages");
  // Under job: pipeline without transfer's split (refused first, on its own
  // line), the cache is the key it does not read: line 8 now.
  std::string pipeline = topology("  cache: memory\n");
  pipeline.replace(pipeline.find("job: transfer"), 13, "job: pipeline");
  pipeline.replace(pipeline.find("  split: []\n"), 12, "");
  expect_refused(write("pipeline", pipeline), 8, "only by jobs that run the backbone frozen");
}

// The settings codec (actors/config/yaml_codec.hpp): every role's settings
// struct survives write_yaml -> read_yaml unchanged, and the reader refuses,
// naming the key's path and line, an unknown or repeated key, a missing one,
// a value of the wrong type and one out of range.

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/config/role_settings.hpp"
#include "actors/config/yaml_codec.hpp"
#include "actors/modes/data_parallel/worker_settings.hpp"
#include "actors/modes/data_parallel/shard_settings.hpp"
#include "actors/modes/pipeline/stage_settings.hpp"
#include "actors/modes/transfer/head_settings.hpp"
#include "actors/modes/transfer/stage_settings.hpp"
#include "messages/errc.hpp"

namespace codec_test {

/// One of every kind of field the codec supports.
struct point {
  int32_t x = 0;
  double weight = 1;
};

template <class Inspector>
void inspect(Inspector& f, point& p) {
  f.field("x", p.x).in(-10, 10);
  f.field("weight", p.weight).above(0.0);
}

struct sample {
  std::string name = "a";
  bool flag = false;
  uint64_t seed = 0;
  int64_t count = 0;
  std::vector<int64_t> shape{1, 2};
  std::vector<std::string> tags;
  std::vector<point> points;
  point origin;
  int32_t level = 0;   ///< optional
  int32_t limit = 5;   ///< in `bounds:`, a map of this struct's own fields
  int32_t doubled = 2; ///< written halved as `half`
};

template <class Inspector>
void inspect(Inspector& f, sample& s) {
  f.field("name", s.name).one_of({"a", "b"});
  f.field("flag", s.flag);
  f.field("seed", s.seed);
  f.field("count", s.count).at_least(0);
  f.field("shape", s.shape);
  f.field("tags", s.tags);
  f.field("points", s.points);
  f.field("origin", s.origin);
  f.optional_field("level", s.level).at_most(3);
  f.object("bounds", [&](auto& g) { g.field("limit", s.limit).at_least(1); });
  f.expect("bounds.limit", s.limit > s.count || s.count == 0, "greater than count");
  f.field("half", [&] { return s.doubled / 2; }, [&](int32_t half) {
    if (half < 0)
      throw std::invalid_argument("no negative halves");
    s.doubled = 2 * half;
  });
}

} // namespace codec_test

using namespace baton::actors;
using codec_test::sample;

namespace {

/// Expects `x` to be refused with bad_config, its message holding `needle`.
template <class T>
void expect_refused(const caf::expected<T>& x, const std::string& needle) {
  ASSERT_FALSE(x) << "accepted; expected a refusal holding: " << needle;
  EXPECT_TRUE(x.error() == baton::errc::bad_config) << baton::describe(x.error());
  EXPECT_NE(baton::describe(x.error()).find(needle), std::string::npos)
    << baton::describe(x.error());
}

/// expect_refused of `text` read as a sample.
void expect_sample_refused(const std::string& text, const std::string& needle) {
  expect_refused(read_yaml<sample>(text, "sample"), needle);
}

/// An edit of a good text and what the refusal of the result says.
struct bad_edit {
  std::string from; ///< replaced, first occurrence
  std::string to;
  std::string needle; ///< in the error message
};

/// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in\n" << text;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

/// Each edit of `text` read as a sample is refused as it says.
void expect_sample_refusals(const std::string& text, const std::vector<bad_edit>& edits) {
  for (const auto& e : edits)
    expect_sample_refused(replaced(text, e.from, e.to), e.needle);
}

sample full_sample() {
  sample s;
  s.name = "b";
  s.flag = true;
  s.seed = UINT64_MAX;
  s.count = 3;
  s.shape = {3, 32, 32};
  s.tags = {"one", "two"};
  s.points = {{1, 0.5}, {-2, 0.1}};
  s.origin = {7, 2.5};
  s.level = 2;
  s.limit = 9;
  s.doubled = 8;
  return s;
}

/// T's write_yaml text, read back, written again: the same text.
template <class T>
T round_trip(const T& x, const std::string& what) {
  const std::string text = write_yaml(x);
  auto back = read_yaml<T>(text, what);
  EXPECT_TRUE(back) << baton::describe(back.error()) << "\n" << text;
  if (!back)
    return T{};
  EXPECT_EQ(write_yaml(*back), text);
  return *back;
}

} // namespace

// -- the codec ------------------------------------------------------------------

TEST(yaml_codec, writes_fields_in_order_and_reads_them_back) {
  const auto s = full_sample();
  const std::string text = write_yaml(s);
  EXPECT_EQ(text.find("name:"), 0u) << text;
  EXPECT_LT(text.find("flag:"), text.find("half:")) << text;
  EXPECT_NE(text.find("half: 4"), std::string::npos) << text;
  EXPECT_NE(text.find("seed: 18446744073709551615"), std::string::npos) << text;
  auto back = round_trip(s, "sample");
  EXPECT_EQ(back.seed, UINT64_MAX);
  EXPECT_EQ(back.tags, s.tags);
  ASSERT_EQ(back.points.size(), 2u);
  EXPECT_EQ(back.points[1].x, -2);
  EXPECT_EQ(back.points[1].weight, 0.1);
  EXPECT_EQ(back.origin.weight, 2.5);
  EXPECT_EQ(back.limit, 9);
  EXPECT_EQ(back.doubled, 8);
}

TEST(yaml_codec, empty_lists_round_trip) {
  sample s;
  s.shape.clear();
  auto back = round_trip(s, "sample");
  EXPECT_TRUE(back.shape.empty());
  EXPECT_TRUE(back.points.empty());
}

TEST(yaml_codec, an_absent_optional_field_keeps_its_default) {
  auto text = write_yaml(full_sample());
  auto back = read_yaml<sample>(replaced(text, "level: 2\n", ""), "sample");
  ASSERT_TRUE(back) << baton::describe(back.error());
  EXPECT_EQ(back->level, 0);
}

TEST(yaml_codec, refuses_unknown_and_repeated_keys_naming_them) {
  const auto text = write_yaml(full_sample());
  expect_sample_refused(text + "\ncolour: red\n", "'colour' is not a known key");
  expect_sample_refused(text + "\ncount: 3\n", "'count' is given twice");
  expect_sample_refusals(
    text, {{"bounds:\n", "bounds:\n  extra: 1\n",
            "'bounds.extra' is not a known key (expected one of: limit)"},
           {"  - x: -2\n", "  - x: -2\n    y: 1\n", "'points.1.y' is not a known key"}});
}

TEST(yaml_codec, refuses_a_missing_key_naming_its_map) {
  expect_sample_refusals(write_yaml(full_sample()),
                         {{"flag: true\n", "", "the sample spec is missing the key 'flag'"},
                          {"  weight: 2.5\n", "", "'origin' is missing the key 'weight'"}});
}

TEST(yaml_codec, refuses_values_of_the_wrong_type_with_the_line) {
  const auto text = write_yaml(full_sample());
  const auto before = text.substr(0, text.find("count:"));
  const auto line = std::to_string(1 + std::count(before.begin(), before.end(), '\n'));
  expect_sample_refusals(
    text,
    {{"count: 3", "count: three", "sample spec:" + line + ": 'count' must be an integer"},
     {"count: 3", "count: 3.5", "'count' must be an integer"},
     {"flag: true", "flag: maybe", "'flag' must be true or false, got 'maybe'"},
     {"weight: 2.5", "weight: heavy", "'origin.weight' must be a finite number"},
     {"weight: 2.5", "weight: .nan", "'origin.weight' must be a finite number"},
     {"origin:\n", "origin: 4\nunused:\n", "'origin' must be a map, got '4'"},
     {"tags:\n", "tags: one\nunused:\n", "'tags' must be a list, got 'one'"},
     {"name: b", "name: [b]", "'name' must be a string"},
     {"  x: 7", "  x: 4294967296", "'origin.x' must be an integer from -2147483648 to 2"}});
}

TEST(yaml_codec, refuses_values_out_of_range_naming_the_range) {
  expect_sample_refusals(
    write_yaml(full_sample()),
    {{"count: 3", "count: -1", "'count' must be at least 0, got '-1'"},
     {"  x: 7", "  x: 11", "'origin.x' must be from -10 to 10, got '11'"},
     {"weight: 2.5", "weight: 0", "'origin.weight' must be greater than 0, got '0'"},
     {"level: 2", "level: 4", "'level' must be at most 3, got '4'"},
     {"name: b", "name: c", "'name' must be one of: a, b, got 'c'"},
     {"limit: 9", "limit: 2", "'bounds.limit' must be greater than count, got '2'"},
     {"half: 4", "half: -1", "'half' is refused: no negative halves"}});
}

TEST(yaml_codec, refuses_what_is_not_a_map_or_not_yaml) {
  for (const std::string& bad : {std::string{}, std::string{"[1, 2]"}, std::string{"7"}})
    expect_sample_refused(bad, "the sample spec must be a map");
  expect_sample_refused("{a: [", "unreadable sample spec: ");
}

// -- every role's settings ------------------------------------------------------

namespace {

baton::model::model_spec some_model() {
  baton::model::model_spec m;
  m.name = "resnet18";
  m.classes = 7;
  m.in_channels = 3;
  m.hidden = {24, 40};
  m.path = "/models/x.pt";
  m.seed = 12345678901234567890u;
  return m;
}

recovery_settings some_recovery() {
  return {"/ckpt/a", 5, 10, 12, 11, "run-7"};
}

source_settings some_source() {
  source_settings s;
  s.data.kind = "synthetic";
  s.data.path = "/data";
  s.data.train_limit = 100;
  s.data.shape = {3, 32, 32};
  s.plan = {32, 4, 3, 99};
  s.tasks = {baton::model::make_task("odd", {0, 1, 0, 1})};
  s.window = 6;
  s.start_step = 40;
  return s;
}

} // namespace

TEST(role_settings, source_round_trips) {
  auto back = round_trip(some_source(), "source");
  EXPECT_EQ(back.data.shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(back.plan.seed, 99u);
  EXPECT_EQ(back.plan.microbatches, 4);
  ASSERT_EQ(back.tasks.size(), 1u);
  EXPECT_EQ(back.tasks[0].classes, 2);
  EXPECT_EQ(back.start_step, 40);
  EXPECT_EQ(to_yaml(back), write_yaml(back));
  auto parsed = parse_source_settings(to_yaml(back));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->window, 6);
}

TEST(role_settings, source_refusals_name_the_key) {
  const auto text = to_yaml(some_source());
  expect_refused(parse_source_settings(replaced(text, "    - 32\n    - 32\n", "    - 32\n")),
                 "'data.shape' must be [C, H, W]");
  expect_refused(parse_source_settings(replaced(text, "      - 0\n", "      - 9\n")),
                 "'tasks.0.labels' is refused");
  expect_refused(parse_source_settings(replaced(text, "restore_step: 40", "restore_step: -1")),
                 "'run.recovery.restore_step' must be at least 0");
}

TEST(role_settings, with_run_sets_the_run_a_role_reads) {
  run_settings run{some_recovery(), true};
  pipeline::stage_settings stage;
  stage.end = 4;
  auto back = pipeline::parse_stage_settings(with_run(to_yaml(stage), run));
  ASSERT_TRUE(back) << baton::describe(back.error());
  EXPECT_EQ(back->recovery.run_id, "run-7");
  EXPECT_EQ(back->recovery.restore_step, 10);
  EXPECT_TRUE(back->trace);
  auto source = parse_source_settings(with_run(to_yaml(some_source()), run));
  ASSERT_TRUE(source) << baton::describe(source.error());
  EXPECT_EQ(source->start_step, 10);
  auto frozen = transfer::parse_stage_settings(with_run(to_yaml(transfer::stage_settings{{}, "", 0, 3}), run));
  EXPECT_TRUE(frozen) << baton::describe(frozen.error());
  run.recovery.checkpoint_dir.clear();
  run.recovery.checkpoint_every = 0;
  expect_refused(pipeline::parse_stage_settings(with_run(to_yaml(stage), run)),
                 "'run.recovery.checkpoint_dir' must be a directory to restore step 10 from");
}

TEST(role_settings, stage_round_trips_and_refuses) {
  transfer::stage_settings s{some_model(), "/ckpt/backbone.pt", 0, 9, 3, 2, {true, 64.5, 128}};
  auto back = round_trip(s, "stage");
  EXPECT_EQ(back.backbone.seed, 12345678901234567890u);
  EXPECT_EQ(back.backbone.hidden, (std::vector<int64_t>{24, 40}));
  EXPECT_EQ(back.features.cache_mb, 64.5);
  EXPECT_EQ(back.features.block_rows, 128);
  const auto text = to_yaml(s);
  const std::vector<bad_edit> edits{
    {"end: 9", "end: 0", "'end' must be greater than begin"},
    {"begin: 0", "begin: 2", "'begin' must be 0 with a cache"},
    {"block_rows: 128", "block_rows: 0", "'features.block_rows' must be at least 1 with a cache"},
    {"cache_mb: 64.5", "cache_mb: -1", "'features.cache_mb' must be at least 0, got '-1'"},
    {"threads: 2", "threads: 0", "'threads' must be at least 1"},
    {"  seed: 12345678901234567890", "  seed: -1", "'backbone.seed' must be an integer from 0"}};
  for (const auto& e : edits)
    expect_refused(transfer::parse_stage_settings(replaced(text, e.from, e.to)), e.needle);
}

TEST(role_settings, head_round_trips_and_refuses) {
  transfer::head_settings h;
  h.head.name = "odd";
  h.head.task_def = baton::model::make_task("odd", {0, 1, 0, 1});
  h.head.model = some_model();
  h.head.optimizer = {0.01, 0.5, 1e-4};
  h.threads = 2;
  h.progress_every = 7;
  h.recovery = some_recovery();
  auto back = round_trip(h, "head");
  EXPECT_EQ(back.head.task_def.classes, 2);
  EXPECT_EQ(back.head.optimizer.weight_decay, 1e-4);
  EXPECT_EQ(back.recovery.checkpoint_every, 5);
  EXPECT_EQ(back.recovery.throw_at_step, 12);
  auto bad = replaced(to_yaml(h), "progress_every: 7", "progress_every: 0");
  expect_refused(transfer::parse_head_settings(bad), "unreadable head spec:");
  expect_refused(transfer::parse_head_settings(bad), "'progress_every' must be at least 1");
}

TEST(role_settings, pipeline_stage_round_trips_and_refuses) {
  pipeline::stage_settings p;
  p.backbone = some_model();
  p.classes = 4;
  p.task = "odd";
  p.begin = 3;
  p.end = 8;
  p.last = true;
  p.schedule = "1f1b-dynamic";
  p.replica = 1;
  p.replicas = 2;
  p.upstream_replicas = 3;
  p.max_in_flight = 2;
  p.vertical_sync = true;
  p.trace = true;
  p.recovery = some_recovery();
  auto back = round_trip(p, "pipeline stage");
  EXPECT_EQ(back.schedule, "1f1b-dynamic");
  EXPECT_TRUE(back.trace);
  EXPECT_TRUE(back.vertical_sync);
  EXPECT_EQ(back.replica, 1);
  const auto text = to_yaml(p);
  expect_refused(pipeline::parse_stage_settings(replaced(text, "1f1b-dynamic", "zigzag")),
                 "'schedule' must be one of: gpipe, 1f1b-flush");
  expect_refused(pipeline::parse_stage_settings(replaced(text, "replica: 1", "replica: 2")),
                 "'replica' must be less than replicas");
}

TEST(role_settings, data_parallel_worker_and_shard_round_trip) {
  data_parallel::worker_settings w;
  w.worker = 1;
  w.workers = 3;
  w.model = some_model();
  w.task = baton::model::make_task("odd", {0, 1, 0, 1});
  w.data = some_source();
  w.exchange = "ps";
  w.shards = 2;
  w.freeze_groups = {"conv1", "fc1"};
  w.adaptive.max_frozen = 2;
  w.cache = true;
  w.feature_block = 16;
  w.recovery = some_recovery();
  auto back = round_trip(w, "data-parallel worker");
  EXPECT_EQ(back.freeze_groups, w.freeze_groups);
  EXPECT_EQ(back.data.tasks.size(), 1u);
  EXPECT_EQ(back.feature_block, 16);
  const auto text = to_yaml(w);
  expect_refused(data_parallel::parse_worker_settings(replaced(text, "name: resnet18", "name: head")),
                 "'model.name' must be one of: mlp, ist_mlp, convnet");
  expect_refused(data_parallel::parse_worker_settings(replaced(text, "max_frozen: 2", "max_frozen: 3")),
                 "'freeze.max_frozen' must be at most the number of groups");

  data_parallel::shard_settings s;
  s.shard = 1;
  s.shards = 2;
  s.workers = 3;
  s.model = some_model();
  s.freeze_up_to = "conv1";
  s.data = some_source();
  s.recovery = some_recovery();
  auto shard = round_trip(s, "data-parallel shard");
  EXPECT_EQ(shard.freeze_up_to, "conv1");
  expect_refused(data_parallel::parse_shard_settings(replaced(to_yaml(s), "shard: 1", "shard: 2")),
                 "'shard' must be less than shards");
}

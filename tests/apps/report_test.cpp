// `baton report` on real runs (issue 24 item 1): from the metrics of two
// tiny runs it writes a report.json that the schema docs/report.schema.json
// accepts (checked by python3-jsonschema) and a self-contained report.html
// with an inline SVG per plot and nothing to fetch; it reads its own
// report.json and a bench's runs back; bad input is a clear error, exit 2;
// text from files is escaped; a missing gnuplot names its package.

#include <fstream>
#include <memory>
#include <regex>
#include <set>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/apps/report_fixture.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

/// Debian's python3 (python3-jsonschema), not another python3 first on PATH.
constexpr const char* system_python = "/usr/bin/python3";

/// Validates the JSON file at `path` against docs/report.schema.json (draft
/// 7): exit code 0 when valid, else the validator's message.
command_output validate(const std::string& path) {
  std::string script =
    "import json, sys, jsonschema\n"
    "schema = json.load(open(sys.argv[1]))\n"
    "jsonschema.Draft7Validator.check_schema(schema)\n"
    "jsonschema.Draft7Validator(schema).validate(json.load(open(sys.argv[2])))\n";
  return run_shell(std::string{system_python} + " -c " + quote(script) + " " +
                   quote(source_path("docs/report.schema.json")) + " " + quote(path) + " 2>&1");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream{path} << text;
}

/// The <figure id="plot-NAME"> ... </figure> of `html`; "" when missing.
std::string figure_of(const std::string& html, const std::string& name) {
  auto start = html.find("<figure id=\"plot-" + name + "\"");
  if (start == std::string::npos)
    return "";
  return html.substr(start, html.find("</figure>", start) - start);
}

class report : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<scratch_dir>("report");
    out_ = make_tiny_report(*dir_);
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    if (run_shell(std::string{system_python} + " -c 'import jsonschema' 2>&1").exit_code != 0)
      FAIL() << system_python << " cannot import jsonschema: install the Debian package "
                                 "python3-jsonschema (scripts/install-deps.sh)";
    ASSERT_FALSE(out_.empty()) << "the tiny runs or their report failed";
  }
  static std::string path_of(const std::string& name) { return dir_->path() + "/" + name; }

  /// `baton predict`'s predictions of local and the ring for the tiny
  /// workload (as `baton compare --predict` adds them), made once for the
  /// suite: the file's path, or "" when predict failed (the case fails).
  static std::string predictions() {
    if (predictions_.empty()) {
      auto predicted = run_baton({"predict", source_path("configs/data-parallel.yaml"),
                                  "--strategies", "local,data-parallel:ring", "--measured-hosts",
                                  "2", "--latency", "0.0001", "--set", "data.train_limit=256",
                                  "--set", "data.test_limit=200", "--json",
                                  path_of("predictions.json")});
      EXPECT_EQ(predicted.exit_code, 0) << predicted.text;
      if (predicted.exit_code == 0)
        predictions_ = path_of("predictions.json");
    }
    return predictions_;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
  static inline std::string out_;
  static inline std::string predictions_;
};

} // namespace

// The report of two metrics files: every run with its summary, the local
// run named "local", the schema satisfied, a ranking of both.
TEST_F(report, json_from_metrics_matches_the_schema) {
  auto check = validate(out_ + "/report.json");
  EXPECT_EQ(check.exit_code, 0) << check.text;
  auto j = read_json(out_ + "/report.json");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["schema"], "baton-report/1");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["label"], "ring");
  EXPECT_EQ(j["runs"][0]["strategy"], "data-parallel");
  EXPECT_EQ(j["runs"][1]["label"], "local");
  EXPECT_EQ(j["runs"][1]["strategy"], "local");
  EXPECT_EQ(j["runs"][0]["command"], "") << "a metrics file does not record its command";
  EXPECT_EQ(j["ranking"].size(), 2u);
  EXPECT_TRUE(j["runs"][0]["summary"]["bytes_per_step"].get<double>() > 0)
    << "two node processes send gradients to each other";
}

// The schema is a real check: a run without its summary, or a ranking that
// is not indices, is refused.
TEST_F(report, schema_refuses_a_broken_report) {
  auto j = read_json(out_ + "/report.json");
  j["runs"][0].erase("summary");
  write_text(path_of("broken.json"), j.dump());
  EXPECT_NE(validate(path_of("broken.json")).exit_code, 0);
  j = read_json(out_ + "/report.json");
  j["ranking"] = {"ring"};
  write_text(path_of("broken2.json"), j.dump());
  EXPECT_NE(validate(path_of("broken2.json")).exit_code, 0);
}

// report.html: an inline <svg> with drawn paths for every plot report.json
// lists (at least accuracy, throughput, bytes, split), the ranked table and
// each row's command, and nothing to fetch: no http(s) address at all, no
// script, no external source.
TEST_F(report, html_is_self_contained_with_an_svg_per_plot) {
  auto html = read_text(out_ + "/report.html");
  auto j = read_json(out_ + "/report.json");
  ASSERT_GE(j["plots"].size(), 4u);
  for (const auto& plot : j["plots"]) {
    auto figure = figure_of(html, plot["name"]);
    EXPECT_TRUE(contains(figure, "<svg")) << plot["name"];
    EXPECT_TRUE(contains(figure, "<path")) << plot["name"];
  }
  for (const char* name : {"accuracy", "throughput", "bytes", "split"})
    EXPECT_FALSE(figure_of(html, name).empty()) << name;
  EXPECT_FALSE(std::regex_search(html, std::regex{"https?://", std::regex::icase}));
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "<link"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_TRUE(contains(html, "<table id=\"ranking\">"));
  EXPECT_TRUE(contains(html, "not known: the run was read from " + dir_->path() + "/ring.json"));
  EXPECT_FALSE(contains(html, "spread evenly over their epochs"))
    << "--mode local records its epochs' times: nothing is estimated";
  // No target: every run "reaches" it at its end; the fastest (or a tie) is named first
  // and highlighted.
  const auto& recommendation = j["recommendation"];
  EXPECT_TRUE(recommendation["kind"] == "fastest" || recommendation["kind"] == "tie")
    << recommendation.dump();
  ASSERT_FALSE(recommendation["winners"].empty()) << recommendation.dump();
  EXPECT_TRUE(contains(html, "<p id=\"recommendation\"><b>" +
                               recommendation["sentence"].get<std::string>().substr(0, 20)))
    << html;
  EXPECT_TRUE(contains(html, "<tr class=\"best\">")) << html;
}

// Metrics without epoch times (--mode local wrote none before issue 34):
// the time to target is estimated, and the accuracy plot's caption says so.
TEST_F(report, metrics_without_epoch_times_are_estimated_and_named) {
  auto metrics = nlohmann::json::parse(read_text(dir_->path() + "/local.json"));
  for (auto& head : metrics["heads"])
    for (auto& e : head["epochs"])
      e.erase("seconds");
  write_text(path_of("untimed.json"), metrics.dump());
  auto out = run_baton({"report", path_of("untimed.json"), "--out", path_of("untimed")});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto html = read_text(path_of("untimed/report.html"));
  EXPECT_TRUE(contains(html, "spread evenly over their epochs (untimed)")) << html;
  auto j = read_json(path_of("untimed/report.json"));
  EXPECT_TRUE(j["runs"][0]["summary"]["time_estimated"].get<bool>());
}

// The time split is of the actors that train, whichever strategy's they
// are (the roles the registry marks): the ring's workers renamed as another
// strategy's trainers split its time alike; as shards (which only store and
// step) they leave no trainer, and the run counts as all compute. ResIST's
// workers had been left out of a list of roles of compare's own.
TEST_F(report, the_time_split_is_of_every_strategy_s_trainers) {
  auto metrics = nlohmann::json::parse(read_text(dir_->path() + "/ring.json"));
  auto split_as = [&](const std::string& role) {
    auto renamed = metrics;
    for (auto& a : renamed["actors"])
      if (a["role"] == "data_parallel_worker")
        a["role"] = role;
    write_text(path_of(role + ".json"), renamed.dump());
    auto out = run_baton({"report", path_of(role + ".json"), "--out", path_of(role)});
    EXPECT_EQ(out.exit_code, 0) << out.text;
    return read_json(path_of(role + "/report.json"))["runs"][0]["summary"]["time_split"];
  };
  const auto ring = split_as("data_parallel_worker");
  ASSERT_TRUE(ring.is_object()) << ring.dump();
  EXPECT_LT(ring["compute"].get<double>(), 1.0) << "two node processes wait for gradients";
  for (const char* role : {"resist_worker", "ist_worker", "pipeline_stage", "head"})
    EXPECT_EQ(split_as(role), ring) << role;
  EXPECT_EQ(split_as("data_parallel_shard")["compute"], 1.0);
}

// A report.json reads back (its runs summarized again for --target), and so
// does a bench's JSON with a "runs" array; the same labels twice are told apart.
TEST_F(report, reads_its_own_report_and_a_bench_json) {
  auto again = run_baton({"report", out_ + "/report.json", "--target", "0.05", "--out",
                          path_of("again")});
  ASSERT_EQ(again.exit_code, 0) << again.text;
  auto j = read_json(path_of("again/report.json"));
  EXPECT_EQ(j["target"], 0.05);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_TRUE(j["runs"][0]["summary"]["reached"].get<bool>()) << "10% accuracy is above 5%";
  auto check = validate(path_of("again/report.json"));
  EXPECT_EQ(check.exit_code, 0) << check.text;

  nlohmann::json bench = {{"bench", "data-parallel"}, {"runs", read_json(out_ + "/report.json")["runs"]}};
  write_text(path_of("bench.json"), bench.dump());
  auto both = run_baton({"report", out_ + "/report.json", path_of("bench.json"), "--out",
                         path_of("both")});
  ASSERT_EQ(both.exit_code, 0) << both.text;
  auto labels = read_json(path_of("both/report.json"))["runs"];
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[2]["label"], "ring (2)");
}

// With the predictions of `baton predict` for the same workload (as
// `baton compare --predict` adds them): the run's predicted step next to
// its measured one, the ranking check, one projection plot per bandwidth
// and the crossovers' section; still valid against the schema.
TEST_F(report, draws_the_predictions) {
  const auto predicted = predictions();
  ASSERT_FALSE(predicted.empty());
  auto j = read_json(out_ + "/report.json");
  j["runs"][0]["strategy"] = "data-parallel:ring"; // compare's name of the strategy run
  j["predictions"] = read_json(predicted);
  write_text(path_of("predicted.json"), j.dump());
  auto out = run_baton({"report", path_of("predicted.json"), "--out", path_of("predicted")});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto check = validate(path_of("predicted/report.json"));
  EXPECT_EQ(check.exit_code, 0) << check.text;
  auto r = read_json(path_of("predicted/report.json"));
  const auto& rows = r["prediction_check"]["runs"];
  ASSERT_EQ(rows.size(), 1u) << "the local run has no measured step time";
  EXPECT_EQ(rows[0]["label"], "ring");
  EXPECT_GT(rows[0]["predicted_step_seconds"].get<double>(), 0);
  // The measured step is the steady one when the run reported progress.
  const auto& summary = j["runs"][0]["summary"];
  ASSERT_TRUE(rows[0].contains("measured_after_warm_up")) << rows[0].dump();
  const bool steady = summary.contains("steady_step_seconds") &&
                      summary["steady_step_seconds"].is_number();
  EXPECT_EQ(rows[0]["measured_after_warm_up"].get<bool>(), steady) << summary.dump();
  EXPECT_DOUBLE_EQ(rows[0]["measured_step_seconds"].get<double>(),
                   summary[steady ? "steady_step_seconds" : "step_seconds"].get<double>());
  // The prediction is the simulation of the plan; the formula beside it is
  // the cross-check, with its step and error.
  EXPECT_EQ(rows[0].value("method", ""), "simulation") << rows[0].dump();
  EXPECT_EQ(r["prediction_check"].value("method", ""), "simulation");
  EXPECT_GT(rows[0].value("formula_step_seconds", 0.0), 0) << rows[0].dump();
  EXPECT_TRUE(rows[0].contains("formula_error_percent")) << rows[0].dump();
  EXPECT_TRUE(r["prediction_check"].contains("formula_mean_abs_error_percent"));
  std::set<std::string> plots;
  for (const auto& p : r["plots"])
    plots.insert(p["name"].get<std::string>());
  for (const char* name : {"predicted", "projection_0", "projection_1", "projection_2"})
    EXPECT_TRUE(plots.count(name)) << name;
  auto html = read_text(path_of("predicted/report.html"));
  EXPECT_TRUE(contains(html, "id=\"ranking-check\""));
  EXPECT_TRUE(contains(html, "<ul id=\"crossovers\">"));
  EXPECT_TRUE(contains(figure_of(html, "projection_0"), "<path"));
}

// Issue 34: the projections and crossovers carry the error of their
// strategy's measured check, and a strategy whose check is off by more than
// 25% is not drawn and its crossovers not stated, the page saying why. The
// ring's run is given a predicted step 10% and then 50% over its measured
// one; `local` has no run with a step to check and is drawn without error bars.
TEST_F(report, projections_carry_the_check_error_and_leave_out_a_strategy_off_by_over_25) {
  const auto predicted = predictions();
  ASSERT_FALSE(predicted.empty());
  for (double over : {0.10, 0.50}) {
    SCOPED_TRACE(over);
    auto j = read_json(out_ + "/report.json");
    j["runs"][0]["strategy"] = "data-parallel:ring";
    j["runs"][0]["summary"]["steady_step_seconds"] = 0.010;
    j["runs"][0]["predicted"] = {{"step_seconds", 0.010 * (1 + over)}};
    j["predictions"] = read_json(predicted);
    const auto name = "banded-" + std::to_string(static_cast<int>(100 * over));
    write_text(path_of(name + ".json"), j.dump());
    auto out = run_baton({"report", path_of(name + ".json"), "--out", path_of(name)});
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_EQ(validate(path_of(name + "/report.json")).exit_code, 0);
    auto r = read_json(path_of(name + "/report.json"));
    std::string captions;
    for (const auto& p : r["plots"])
      if (p["name"].get<std::string>().rfind("projection_", 0) == 0)
        captions += p["caption"].get<std::string>() + "\n";
    ASSERT_FALSE(captions.empty()) << r["plots"].dump();
    EXPECT_TRUE(contains(captions, "Without error bars (no run of theirs to check against): local"))
      << captions;
    auto html = read_text(path_of(name + "/report.html"));
    if (over < 0.25) {
      EXPECT_TRUE(contains(captions, "data-parallel:ring +/-10.0%")) << captions;
      EXPECT_TRUE(contains(figure_of(html, "projection_0"), "<path"));
    } else {
      EXPECT_TRUE(contains(captions, "Not drawn: data-parallel:ring (50.0%)")) << captions;
      EXPECT_FALSE(contains(html, "overtakes data-parallel:ring")) << html;
      EXPECT_FALSE(contains(html, "data-parallel:ring overtakes")) << html;
    }
  }
}

// Text from the files (here a label from a file name) is escaped in the
// page: it cannot add markup.
TEST_F(report, escapes_text_from_files) {
  auto metrics = read_text(dir_->path() + "/local.json");
  auto odd = path_of("<b>&x'.json");
  write_text(odd, metrics);
  auto out = run_baton({"report", odd, "--out", path_of("odd")});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto html = read_text(path_of("odd/report.html"));
  EXPECT_TRUE(contains(html, "&lt;b&gt;&amp;x&#39;"));
  EXPECT_FALSE(contains(html, "<b>&x"));
}

// Bad input: exit 2 with the file (or value) named. A FIFO is refused
// unread, by the kind of the file opened (a FIFO without a writer would
// block a read).
TEST_F(report, bad_input_is_exit_2_naming_it) {
  ASSERT_EQ(::mkfifo(path_of("fifo.json").c_str(), 0600), 0);
  write_text(path_of("not.json"), "epoch,seconds\n1,2\n");
  write_text(path_of("other.json"), R"({"job": "transfer", "data": {}})");
  write_text(path_of("runless.json"), R"({"runs": [{"label": "x"}]})");
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  std::vector<bad_case> cases{
    {{path_of("missing.json")}, path_of("missing.json") + ": No such file or directory"},
    {{path_of("fifo.json")}, path_of("fifo.json") + ": not a regular file (a FIFO or pipe)"},
    {{path_of("not.json")}, path_of("not.json") + ": not JSON"},
    {{path_of("other.json")}, path_of("other.json") + ": JSON of another kind"},
    {{path_of("runless.json")}, path_of("runless.json") + ": a run in \"runs\" without"},
    {{}, "no files given"},
    {{out_ + "/report.json", "--target", "1.5"}, "--target expects a test accuracy from 0 to 1"},
    {{out_ + "/report.json", "--outt", "x"}, "did you mean '--out'?"}};
  for (const auto& c : cases) {
    auto out = run_baton(with({"report"}, with(c.args, {"--out", path_of("bad")})));
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_TRUE(contains(out.text, c.says)) << out.text;
  }
}

// Issue 32 item 6: hostile files aborted or crashed `baton report` (fields of
// the wrong type, 1e999, 100,000 nested objects). Each is refused with exit 2
// naming the file and the field.
TEST_F(report, hostile_json_is_exit_2_naming_the_file_and_field) {
  const auto metrics = nlohmann::json::parse(read_text(dir_->path() + "/local.json"));
  const auto own = nlohmann::json::parse(read_text(out_ + "/report.json"));
  struct hostile {
    std::string name;
    std::string text;
    std::string says;
  };
  auto edited = [](nlohmann::json j, const nlohmann::json::json_pointer& at,
                   nlohmann::json value) {
    j[at] = std::move(value);
    return j.dump();
  };
  using ptr = nlohmann::json::json_pointer;
  auto wall = metrics.dump();
  const std::string key = "\"wall_seconds\":";
  wall.insert(wall.find(key) + key.size(), "1e999,\"x\":");
  std::string nested = "{\"heads\": [], \"mode\": \"local\", \"deep\": ";
  for (int i = 0; i < 100000; ++i)
    nested += "{\"a\":";
  nested += "1" + std::string(100000, '}') + "}";
  const std::vector<hostile> cases{
    {"mode.json", edited(metrics, ptr{"/mode"}, 5), "mode.json: mode: expected a string, got 5"},
    {"epochs.json", edited(metrics, ptr{"/heads/0/epochs"}, "x"),
     "epochs.json: heads[0].epochs: expected an array, got \"x\""},
    {"epoch.json", edited(metrics, ptr{"/heads/0/epochs/0/test_accuracy"}, "high"),
     "epoch.json: heads[0].epochs[0].test_accuracy: expected a number from 0 to 1"},
    {"summary.json", edited(own, ptr{"/runs/0/summary/reached"}, "yes"),
     "summary.json: runs[0].summary.reached: expected true or false, got \"yes\""},
    {"machine.json", edited(own, ptr{"/machine"}, "m"),
     "machine.json: machine: expected an object, got \"m\""},
    {"cluster.json", edited(own, ptr{"/cluster/local_nodes"}, "two"),
     "cluster.json: cluster.local_nodes: expected a number at least 0"},
    {"skipped.json", edited(own, ptr{"/skipped"}, nlohmann::json::array({7})),
     "skipped.json: skipped[0]: expected an object, got 7"},
    {"predictions.json", edited(own, ptr{"/predictions"}, {{"measured", {1}}}),
     "predictions.json: predictions.measured[0]: expected an object, got 1"},
    {"inner.json", edited(own, ptr{"/runs/0/metrics/heads"}, {{"a", 1}}),
     "inner.json: runs[0].metrics.heads: expected an array"},
    {"huge.json", wall, "huge.json: wall_seconds: expected a finite number, got "
                        "[json.exception.out_of_range.406] number overflow parsing '1e999'"},
    {"nested.json", nested, "nested.json: arrays and objects nested 100001 deep, more than the "
                            "64"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_text(path_of(c.name), c.text);
    auto out = run_baton({"report", path_of(c.name), "--out", path_of("hostile")});
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_TRUE(contains(out.text, path_of(c.says))) << out.text;
  }
}

// Runs with no usable epoch, or values near a double's limit, made gnuplot
// fail ("x range is invalid", exit 1): the plot is left out with a note.
TEST_F(report, plots_without_a_drawable_value_are_left_out_with_a_note) {
  auto metrics = nlohmann::json::parse(read_text(dir_->path() + "/local.json"));
  auto empty = metrics;
  for (auto& head : empty["heads"])
    head["epochs"] = nlohmann::json::array();
  write_text(path_of("no-epochs.json"), empty.dump());
  auto out = run_baton({"report", path_of("no-epochs.json"), "--out", path_of("no-epochs")});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_FALSE(contains(out.text, "range is invalid")) << out.text;
  auto html = read_text(path_of("no-epochs/report.html"));
  EXPECT_TRUE(contains(figure_of(html, "accuracy"), "Not drawn: nothing to draw: no run has an "
                                                    "epoch with a test accuracy"))
    << figure_of(html, "accuracy");
  EXPECT_TRUE(contains(figure_of(html, "throughput"), "<svg")) << html;

  auto huge = metrics;
  for (auto& head : huge["heads"])
    for (auto& e : head["epochs"])
      e["seconds"] = 1e308;
  huge["train_seconds"] = 1e-300; // samples per second of 1e303
  write_text(path_of("huge.json"), huge.dump());
  out = run_baton({"report", path_of("huge.json"), "--out", path_of("huge")});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_FALSE(contains(out.text, "range is invalid")) << out.text;
  html = read_text(path_of("huge/report.html"));
  for (const char* plot : {"accuracy", "throughput"})
    EXPECT_TRUE(contains(figure_of(html, plot), "is beyond what a plot can show"))
      << plot << ": " << figure_of(html, plot);
  EXPECT_EQ(validate(path_of("huge/report.json")).exit_code, 0);
}

// Without gnuplot the report is refused with the package to install.
TEST_F(report, a_missing_gnuplot_names_its_package) {
  auto out = run_shell("PATH=" + quote(path_of("empty-path")) + " " +
                       baton_command({"report", out_ + "/report.json", "--out", path_of("nognu")}));
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_TRUE(contains(out.text, "gnuplot-nox")) << out.text;
}

#include "apps/report/report.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "apps/report/analysis.hpp"
#include "apps/report/gnuplot.hpp"
#include "apps/report/html.hpp"
#include "apps/report/inputs.hpp"
#include "apps/report/machine.hpp"
#include "apps/report/plots.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

std::string utc_now() {
  auto now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

/// Writes `text` to `path` whole (model::try_replace_file: a new temporary
/// file renamed over it, never through a symbolic link).
caf::expected<void> write_whole(const std::string& path, const std::string& text) {
  if (auto why = model::try_replace_file(path, text); !why.empty())
    return make_error(errc::bad_file, why);
  return {};
}

/// `report` with what write_report adds: schema, defaults, the ranking and
/// the prediction check.
json completed(json report) {
  report["schema"] = "baton-report/1";
  report.emplace("created", utc_now());
  report.emplace("title", "baton compare");
  report.emplace("workload", nullptr);
  report.emplace("target", nullptr);
  // The machine's fields this_machine() has and the report lacks: a run of
  // baton compare ran here.
  auto machine = this_machine();
  machine.update(report.value("machine", json::object()));
  report["machine"] = machine;
  if (report["target"].is_null() && report["workload"].is_object())
    report["target"] = report["workload"].value("target", json{});
  report.emplace("cluster", json{{"description", "loopback"}});
  report.emplace("skipped", json::array());
  auto& cluster = report["cluster"];
  if (!cluster.contains("description")) {
    auto link = cluster.value("link", "");
    cluster["description"] = std::to_string(cluster.value("local_nodes", 0)) +
                             " local node process(es), " +
                             (link.empty() ? "loopback links" : "emulated links " + link);
  }
  report["runs"] = with_predicted_steps(report["runs"], report.value("predictions", json{}),
                                       cluster);
  json order = json::array();
  for (auto i : ranking(report["runs"]))
    order.push_back(i);
  report["ranking"] = order;
  report["recommendation"] = recommendation(report["runs"], report["target"]);
  report["prediction_check"] = prediction_check(report["runs"]);
  return report;
}

bool parse_target(const std::string& text, double& out) {
  if (!parse_positive("--target", text, out))
    return false;
  if (out > 1) {
    std::fprintf(stderr, "baton report: --target expects a test accuracy from 0 to 1, got '%s'\n",
                 text.c_str());
    return false;
  }
  return true;
}

} // namespace

caf::expected<void> write_report(const json& input, const std::string& dir) {
  if (!input.is_object() || !input.contains("runs") || !input["runs"].is_array())
    return make_error(errc::bad_file, "a report needs a \"runs\" array");
  auto report = completed(input);
  auto plots = report_plots(report);
  std::vector<gnuplot_figure> figures;
  for (const auto& p : plots) {
    if (p.omitted.empty())
      figures.push_back(p.figure);
    else
      spdlog::warn("baton report: the plot '{}' is not drawn: {}", p.title, p.omitted);
    report["plots"].push_back({{"name", p.figure.name}, {"title", p.title},
                               {"caption", p.caption}});
  }
  report.emplace("plots", json::array());
  auto drawn = draw_svg(figures);
  if (!drawn)
    return drawn.error();
  // One per plot, in order: "" for those not drawn.
  std::vector<std::string> svgs;
  size_t next = 0;
  for (const auto& p : plots)
    svgs.push_back(p.omitted.empty() && next < drawn->size() ? (*drawn)[next++] : std::string{});
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::bad_file, "cannot make the directory " + dir + ": " + ec.message());
  if (auto done = write_whole(dir + "/report.json", report.dump(2) + "\n"); !done)
    return done;
  return write_whole(dir + "/report.html", report_page(report, plots, svgs));
}

int cmd_report(args& a) {
  std::vector<std::string> files;
  std::string out = "report";
  std::optional<double> target;
  bool good = read_flags(a, "baton report", [&](const std::string& flag) {
    if (flag == "--out")
      return a.value(flag, out);
    if (flag == "--target") {
      std::string text;
      double value = 0;
      return a.value(flag, text) && parse_target(text, value) && (target = value, true);
    }
    if (flag.rfind("--", 0) == 0)
      return false;
    files.push_back(flag);
    return true;
  });
  if (!good)
    return 2;
  if (files.empty()) {
    std::fprintf(stderr, "baton report: no files given: baton report FILE... [--out DIR] "
                         "[--target ACC] (see baton help)\n");
    return 2;
  }
  caf::expected<json> report{json{}};
  try {
    report = report_from_files(files, target);
    if (!report)
      return fail(report.error());
    if (auto done = write_report(*report, out); !done)
      return fail(done.error());
  } catch (const json::exception& e) {
    // The inputs are checked first (input_check.hpp): a field read here that
    // the checks missed is still bad input, never an abort.
    spdlog::error("baton report: a field of the inputs has a type the report cannot read ({}); "
                  "see docs/report.schema.json",
                  e.what());
    return 2;
  }
  std::printf("baton report: %zu runs: %s/report.html, %s/report.json\n",
              (*report)["runs"].size(), out.c_str(), out.c_str());
  return 0;
}

} // namespace baton::apps

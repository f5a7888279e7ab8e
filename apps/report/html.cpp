#include "apps/report/html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/report/analysis.hpp"
#include "apps/report/gnuplot.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

/// The page's look: readable on a laptop and in print, plots scaled to the
/// width.
constexpr const char* style = R"(
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
.wide { overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: right; }
th { background: #f0f0f0; } td.name, th.name { text-align: left; }
tr.best td { background: #eaf4ea; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 0 1.5em; }
figure { margin: 0.5em 0; } figure h2 { margin-top: 0.8em; }
figure svg { width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.85em; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; white-space: pre-wrap; }
.note { color: #555; }
)";

std::string seconds_text(std::optional<double> s) {
  return s ? fixed(*s, seconds_digits(*s)) + " s" : "&ndash;";
}

std::string bytes_text(std::optional<double> b) {
  if (!b)
    return "&ndash;";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  double x = *b;
  for (; x >= 1024 && u + 1 < sizeof units / sizeof units[0]; ++u)
    x /= 1024;
  return fixed(x, u == 0 ? 0 : 1) + " " + units[u];
}

std::string percent_text(std::optional<double> fraction) {
  return fraction ? fixed(100 * *fraction, 1) + "%" : "&ndash;";
}

std::string cell(const std::string& html, bool name = false) {
  return std::string{name ? "<td class=\"name\">" : "<td>"} + html + "</td>";
}

// -- the header: what ran where ------------------------------------------------------

std::string text_at(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

/// The workload: its file (a string, or compare's {file, overrides}).
std::string workload_text(const json& workload) {
  if (workload.is_string())
    return "Workload <code>" + html_escape(workload.get<std::string>()) + "</code>. ";
  if (!workload.is_object() || !workload.contains("file"))
    return "";
  std::string html = "Workload <code>" + html_escape(text_at(workload, "file"));
  for (const auto& o : workload.value("overrides", json::array()))
    html += " --set " + html_escape(o.is_string() ? o.get<std::string>() : o.dump());
  return html + "</code>. ";
}

/// The recommendation's sentence, first thing under the title.
std::string recommendation_section(const json& report) {
  const auto& r = report.value("recommendation", json::object());
  if (!r.is_object() || !r.contains("sentence"))
    return "";
  return "<p id=\"recommendation\"><b>" + html_escape(text_at(r, "sentence")) + "</b></p>\n";
}

std::string header_section(const json& report) {
  std::string html = "<h1>" + html_escape(text_at(report, "title")) + "</h1>\n<p>";
  html += workload_text(report.value("workload", json{}));
  if (auto target = number_at(report, "target"))
    html += "Target test accuracy " + percent_text(*target) + ". ";
  else
    html += "No target accuracy: time to target is each run's whole training time. ";
  html += "Made " + html_escape(text_at(report, "created")) + ".</p>\n";
  html += recommendation_section(report);
  const auto& m = report.value("machine", json::object());
  html += "<h2>Machine and link</h2>\n<p>";
  if (auto note = text_at(m, "note"); !note.empty())
    html += html_escape(note) + "<br>";
  html += "Host <code>" + html_escape(text_at(m, "hostname")) + "</code>: " +
          html_escape(text_at(m, "cpu")) + ", " + html_escape(text_at(m, "cores")) +
          " cores, " + bytes_text(number_at(m, "memory_bytes")) + " memory, " +
          html_escape(text_at(m, "os")) + "; baton " + html_escape(text_at(m, "baton")) +
          ".<br>";
  const auto& c = report.value("cluster", json::object());
  html += "Cluster: " + html_escape(text_at(c, "description")) + "</p>\n";
  return html;
}

// -- the ranked table ------------------------------------------------------------------

std::string time_to_target_cell(const json& s) {
  if (s.value("reached", false))
    return seconds_text(number_at(s, "time_to_target_seconds")) +
           (s.value("time_estimated", false) ? " (est.)" : "");
  if (number_at(s, "epochs_run") == 0.0)
    return "not reached, no epoch evaluated";
  return "not reached, best " + percent_text(number_at(s, "best_accuracy"));
}

/// " (min-max)" of a repeated run's `key` in its spread, each value as
/// `text` shows it; "" for a run made once.
template <class Text>
std::string range_text(const json& run, const char* key, Text text) {
  const auto& spread = run.value("spread", json::object());
  if (!spread.is_object() || number_at(spread, "runs").value_or(1) < 2 || !spread.contains(key))
    return "";
  auto low = number_at(spread[key], "min"), high = number_at(spread[key], "max");
  if (!low || !high)
    return "";
  return " <span class=\"note\">(" + text(*low) + "&ndash;" + text(*high) + ")</span>";
}

std::string split_cell(const json& s) {
  const auto& split = s.value("time_split", json::object());
  return percent_text(number_at(split, "compute")) + " / " +
         percent_text(number_at(split, "communication")) + " / " +
         percent_text(number_at(split, "waiting"));
}

/// The prediction columns of `run` from the check's row of the same label.
std::string prediction_cells(const json& check, const json& run) {
  if (check.is_null())
    return "";
  for (const auto& row : check["runs"])
    if (row.value("label", "") == run.value("label", ""))
      return cell(fixed(1000 * row.value("predicted_step_seconds", 0.0), 1) + " ms") +
             cell(fixed(row.value("error_percent", 0.0), 1) + "%");
  return cell("&ndash;") + cell("&ndash;");
}

/// Whether `run` is one the recommendation names (the fastest or a tie):
/// the highlighted rows; none when no run reached the target.
bool recommended(const json& report, const json& run) {
  const auto& r = report.value("recommendation", json::object());
  const auto& winners = r.is_object() ? r.value("winners", json::array()) : json::array();
  return std::find(winners.begin(), winners.end(), json(run.value("label", ""))) != winners.end();
}

std::string table_row(const json& report, const json& run, size_t rank) {
  const auto& s = summary_of(run);
  auto speedup = speedup_over_local(report["runs"], run);
  auto steps = number_at(s, "step_seconds");
  auto seconds = [](double x) { return fixed(x, seconds_digits(x)); };
  auto rate = [](double x) { return fixed(x, 0); };
  auto milliseconds = [](double x) { return fixed(1000 * x, 1); };
  return std::string{recommended(report, run) ? "<tr class=\"best\">" : "<tr>"} +
         cell(std::to_string(rank)) + cell(html_escape(run.value("label", "")), true) +
         cell(html_escape(run.value("strategy", "")), true) +
         cell(time_to_target_cell(s) +
              (s.value("reached", false) ? range_text(run, "time_to_target_seconds", seconds)
                                         : "")) +
         cell(html_escape(text_at(s, "epochs_to_target"))) +
         cell(fixed(number_at(s, "samples_per_second").value_or(0), 0) +
              range_text(run, "samples_per_second", rate)) +
         cell(steps ? fixed(1000 * *steps, 1) + " ms" + range_text(run, "step_seconds", milliseconds)
                    : "&ndash;") +
         cell(bytes_text(number_at(s, "bytes_per_step"))) +
         cell(bytes_text(number_at(s, "bytes_per_epoch"))) +
         cell(bytes_text(number_at(s, "peak_rss_bytes"))) +
         cell(percent_text(number_at(s, "cpu_utilisation"))) + cell(split_cell(s)) +
         cell(speedup ? fixed(*speedup, 2) + "x" : "&ndash;") +
         prediction_cells(report.value("prediction_check", json{}), run) + "</tr>\n";
}

std::string table_section(const json& report) {
  bool predicted = !report.value("prediction_check", json{}).is_null();
  std::string html =
    "<h2>Ranking</h2>\n<div class=\"wide\"><table id=\"ranking\">\n<tr><th>#</th><th class=\"name\">run</th>"
    "<th class=\"name\">strategy</th><th>time to target</th><th>epochs to target</th>"
    "<th>samples/s</th><th>step</th><th>bytes/step</th><th>bytes/epoch</th>"
    "<th>peak memory</th><th>CPU use</th>"
    "<th>compute / comm. / waiting</th><th>speedup over local</th>";
  if (predicted)
    html += "<th>predicted step</th><th>error</th>";
  html += "</tr>\n";
  size_t rank = 0;
  for (auto index : report.value("ranking", json::array()))
    html += table_row(report, report["runs"].at(index.get<size_t>()), ++rank);
  html += "</table></div>\n<p class=\"note\">Ranked by time to target; runs that did not reach it "
          "after them, by the best accuracy reached within the shortest common time. A run "
          "repeated (--repeat) shows the median of its runs and, in brackets, their min&ndash;max. "
          "Highlighted: the fastest, or the runs tied with it; none when no run reached the "
          "target. Peak memory: the largest node's; CPU use: over the training time. (est.): a "
          "run whose metrics have no epoch times: its training time spread evenly over its "
          "epochs.</p>\n";
  return html;
}

// -- predictions, commands, skipped ---------------------------------------------------

/// The runtime's own costs the simulation charged (a report of predictions
/// made before they were measured has none: "").
std::string runtime_sentence(const json& runtime) {
  if (!runtime.is_object() || !runtime.contains("byte_seconds"))
    return "";
  return "The runtime's own cost per message: " +
         fixed(1e6 * runtime.value("message_seconds", 0.0), 2) + " &micro;s at each end, " +
         fixed(1e6 * runtime.value("remote_message_seconds", 0.0), 1) +
         " &micro;s more between hosts, " + fixed(1e9 * runtime.value("byte_seconds", 0.0), 3) +
         " ms per MB, and " + fixed(1e9 * runtime.value("io_byte_seconds", 0.0), 3) +
         " ms of CPU per MB at each end beside the actors (" +
         html_escape(runtime.contains("cache_file") ? "measured once, kept in " +
                                                        text_at(runtime, "cache_file")
                                                    : text_at(runtime, "method")) +
         "). ";
}

/// "A and B, C and D" of a check's pairs of labels at `key`, or "".
std::string pairs_text(const json& check, const char* key) {
  const auto& ties = check.value(key, json::array());
  std::string pairs;
  if (!ties.is_array())
    return pairs;
  for (const auto& pair : ties)
    if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string())
      pairs += (pairs.empty() ? "" : ", ") + html_escape(pair[0].get<std::string>()) + " and " +
               html_escape(pair[1].get<std::string>());
  return pairs;
}

/// " where it orders them (A and B predicted within 1% ...)" and " and the
/// runs order them (C and D: ...)" where the check has such pairs.
std::string ties_text(const json& check) {
  std::string text;
  if (auto pairs = pairs_text(check, "predicted_ties"); !pairs.empty())
    text += " where it orders them (" + pairs + " predicted within 1% of each other: not ordered)";
  if (auto pairs = pairs_text(check, "measured_ties"); !pairs.empty())
    text += std::string{text.empty() ? " where" : " and"} + " the runs order them (" + pairs +
            ": their repeats' ranges overlap, not ordered)";
  return text;
}

std::string predictions_section(const json& report) {
  std::string html;
  const auto& check = report.value("prediction_check", json{});
  if (!check.is_null())
    html += std::string{"<p id=\"ranking-check\">The cost model's ranking of these runs (by "
                        "samples/s after the warm-up, "} +
            (check.value("method", "") == "simulation" ? "from a simulation of each run's plan) "
                                                        : "from the formulas) ") +
            (check.value("ranking_matches", false) ? "<b>matches</b>" : "<b>does not match</b>") +
            " the measured one" + ties_text(check) + "; mean step time error " +
            fixed(check.value("mean_abs_error_percent", 0.0), 1) + "%" +
            (check.contains("formula_mean_abs_error_percent")
               ? std::string{". The formulas' cross-check: mean error "} +
                   fixed(check.value("formula_mean_abs_error_percent", 0.0), 1) +
                   "%, their ranking " +
                   (check.value("formula_ranking_matches", false) ? "matches" : "does not match")
               : std::string{}) +
            ".</p>\n";
  const auto& predictions = report.value("predictions", json::object());
  if (!predictions.is_object() || predictions.empty())
    return html;
  if (predictions.contains("error"))
    return html + "<p id=\"predictions-error\">No predictions: " +
           html_escape(text_at(predictions, "error")) + "</p>\n";
  const auto& link = predictions.value("link", json::object());
  html += "<p class=\"note\">The cost model's link: " +
          html_escape(text_at(link, "measured_on")) + ", " + html_escape(text_at(link, "method")) +
          ". " + runtime_sentence(predictions.value("runtime", json::object())) +
          html_escape(text_at(predictions, "note")) + ".</p>\n";
  html += "<h2>Crossovers</h2>\n<ul id=\"crossovers\">\n";
  const auto& crossovers = predictions.value("crossovers", json::array());
  if (crossovers.empty())
    html += "<li>none: on this grid of hosts and link rates no strategy overtakes another</li>\n";
  // Each with the error of its strategies' measured check: a crossover of
  // a strategy whose check is off by more than drawn_error_limit is not
  // stated, only named with why.
  const auto errors = check_errors(check);
  for (const auto& c : crossovers) {
    const std::string sentence = c.is_string() ? c.get<std::string>() : text_at(c, "sentence");
    std::string band, dropped;
    for (const char* side : {"faster_above", "faster_below"}) {
      auto it = c.is_object() ? errors.find(c.value(side, "")) : errors.end();
      if (it == errors.end())
        continue;
      const std::string error = it->first + " " + fixed(it->second, 1) + "%";
      auto& list = it->second > drawn_error_limit ? dropped : band;
      list += (list.empty() ? "" : ", ") + error;
    }
    if (!dropped.empty())
      html += "<li class=\"dropped\">not stated: a crossover of a strategy whose measured check "
              "is off by more than " + fixed(drawn_error_limit, 0) + "% (" + html_escape(dropped) +
              ")</li>\n";
    else
      html += "<li>" + html_escape(sentence) +
              (band.empty() ? "" : " (the check's step-time error: " + html_escape(band) + ")") +
              "</li>\n";
  }
  return html + "</ul>\n";
}

std::string command_text(const json& run) {
  auto command = run.value("command", "");
  if (!command.empty())
    return command;
  auto source = run.value("source", "");
  return "not known: the run was read from " + (source.empty() ? "a file" : source) +
         " (its metrics do not record the command)";
}

std::string commands_section(const json& report) {
  std::string html = "<h2>Commands to reproduce each row</h2>\n<dl id=\"commands\">\n";
  for (const auto& run : report["runs"])
    html += "<dt>" + html_escape(run.value("label", "")) + "</dt><dd><pre>" +
            html_escape(command_text(run)) + "</pre></dd>\n";
  return html + "</dl>\n";
}

std::string skipped_section(const json& report) {
  const auto& skipped = report.value("skipped", json::array());
  if (skipped.empty())
    return "";
  std::string html = "<h2>Strategies not run</h2>\n<table id=\"skipped\">\n"
                      "<tr><th class=\"name\">strategy</th><th class=\"name\">why</th></tr>\n";
  for (const auto& s : skipped)
    html += "<tr>" + cell(html_escape(s.value("strategy", "")), true) +
            cell(html_escape(s.value("reason", "")), true) + "</tr>\n";
  return html + "</table>\n";
}

std::string plots_section(const std::vector<report_plot>& plots,
                          const std::vector<std::string>& svgs) {
  std::string html = "<div class=\"plots\">\n";
  for (size_t i = 0; i < plots.size() && i < svgs.size(); ++i)
    html += "<figure id=\"plot-" + html_escape(plots[i].figure.name) + "\">\n<h2>" +
            html_escape(plots[i].title) + "</h2>\n" +
            (plots[i].omitted.empty() ? inline_svg(svgs[i], "p" + std::to_string(i) + "-")
                                      : std::string{"<p class=\"note\">(not drawn)</p>"}) +
            "\n<figcaption>" +
            html_escape(plots[i].caption) + "</figcaption>\n</figure>\n";
  return html + "</div>\n";
}

} // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string report_page(const json& report, const std::vector<report_plot>& plots,
                        const std::vector<std::string>& svgs) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
         html_escape(text_at(report, "title")) + "</title>\n<style>" + style +
         "</style>\n</head>\n<body>\n" + header_section(report) + table_section(report) +
         predictions_section(report) + plots_section(plots, svgs) + commands_section(report) +
         skipped_section(report) +
         "<p class=\"note\">Written by <code>baton report</code>; plots drawn by gnuplot.</p>\n"
         "</body>\n</html>\n";
}

} // namespace baton::apps

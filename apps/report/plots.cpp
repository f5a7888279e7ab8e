#include "apps/report/plots.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "apps/report/analysis.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

/// Settings every bar chart shares: one bar or group per run, labels slanted.
constexpr const char* bar_settings = "set style fill solid 0.85 border -1\n"
                                     "set grid ytics\n"
                                     "set xtics rotate by -25 scale 0\n"
                                     "set yrange [0:*]\n"
                                     "set key top right\n";

/// A palette that stays distinct in print and for colour-blind readers (Tol's).
const char* colour(size_t i) {
  static const char* colours[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44",
                                  "#66ccee", "#aa3377", "#bbbbbb", "#000000"};
  return colours[i % (sizeof colours / sizeof colours[0])];
}

std::string number(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

const json& summary_of(const json& run) {
  static const json none = json::object();
  return run.contains("summary") && run["summary"].is_object() ? run["summary"] : none;
}

std::string label_of(const json& run) {
  return run.value("label", run.value("strategy", "run"));
}

/// A unit for `largest` bytes: its divisor and name.
std::pair<double, std::string> byte_unit(double largest) {
  if (largest >= 1 << 30)
    return {double(1 << 30), "GiB"};
  if (largest >= 1 << 20)
    return {double(1 << 20), "MiB"};
  if (largest >= 1 << 10)
    return {double(1 << 10), "KiB"};
  return {1, "bytes"};
}

/// A line of a bar chart's data: the run's label, then `values`.
std::string bar_row(const std::string& label, std::initializer_list<double> values) {
  std::string row = gnuplot_field(label);
  for (double value : values)
    row += " " + number(value);
  return row + "\n";
}

/// What names a bar chart: its figure (NAME.svg, its data NAME.dat), the
/// heading above it and the caption below.
struct heading {
  std::string name;
  std::string title;
  std::string caption;
};

/// A bar chart of `data` (a bar_row per run): the settings every bar chart
/// shares, then `commands`.
report_plot bar_chart(const heading& h, const std::string& data, const std::string& commands) {
  report_plot p;
  p.title = h.title;
  p.caption = h.caption;
  p.figure.name = h.name;
  p.figure.data = {{h.name + ".dat", data}};
  p.figure.commands = bar_settings + commands;
  return p;
}

/// The min and max of a repeated run's `key` (its "spread"); none for a
/// run made once.
std::optional<std::pair<double, double>> spread_of(const json& run, const char* key) {
  const auto& spread = run.value("spread", json::object());
  if (!spread.is_object() || number_at(spread, "runs").value_or(1) < 2 || !spread.contains(key))
    return std::nullopt;
  auto low = number_at(spread[key], "min"), high = number_at(spread[key], "max");
  if (!low || !high)
    return std::nullopt;
  return std::make_pair(*low, *high);
}

/// One bar per run: the summary's `key` over `divisor`, its value written
/// above the bar with `format` (a gnuplot sprintf format); a whisker from
/// the min to the max of a repeated run's values (its spread).
report_plot bars(const json& runs, const char* key, double divisor, const heading& h,
                 const std::string& ylabel, const std::string& format) {
  std::string data;
  bool whiskers = false;
  for (const auto& run : runs) {
    auto value = number_at(summary_of(run), key).value_or(0);
    auto range = spread_of(run, key);
    whiskers = whiskers || range.has_value();
    auto [low, high] = range.value_or(std::make_pair(value, value));
    data += bar_row(label_of(run), {value / divisor, low / divisor, high / divisor});
  }
  return bar_chart(h, data,
                   "set boxwidth 0.6\nset ylabel " + gnuplot_quote(ylabel) +
                     "\nset offsets 0.5, 0.5, graph 0.1, 0\nplot '" + h.name +
                     ".dat' using 0:2:xtic(1) with boxes lc rgb '" + colour(0) + "' notitle" +
                     (whiskers ? ", '' using 0:2:3:4 with yerrorbars lc rgb '#000000' pt -1 "
                                 "title 'min-max of the repeats'"
                               : "") +
                     ", '' using 0:" + (whiskers ? "4" : "2") + ":(sprintf(" +
                     gnuplot_quote(format) + ", $2)) with labels offset 0,0.8 notitle");
}

/// A column of a histogram: its title in the key and its colour.
struct column {
  const char* title;
  size_t colour;
};

/// A histogram of `data` (a bar_row per run, a value per column) in
/// `style` ("rowstacked", "clustered gap 1"), `settings` (its axes) first.
report_plot histogram(const heading& h, const std::string& data, const std::string& style,
                      const std::string& settings, const std::vector<column>& columns) {
  std::string plot = "plot '" + h.name + ".dat' using 2:xtic(1)";
  for (size_t i = 0; i < columns.size(); ++i)
    plot += (i ? ", '' using " + std::to_string(i + 2) : std::string{}) + " lc rgb '" +
            colour(columns[i].colour) + "' title " + gnuplot_quote(columns[i].title);
  return bar_chart(h, data,
                   "set style data histograms\nset style histogram " + style + "\n" +
                     settings + "set key outside right top\n" + plot);
}

/// Adds the line `title` of a line plot, in colour `i`: its `data` (x y
/// lines) as `file`, and its part of the `plot` command.
void add_line(report_plot& p, std::string& plot, const std::string& file, const std::string& data,
              size_t i, const std::string& title) {
  p.figure.data.emplace_back(file, data);
  plot += std::string{plot.empty() ? "plot " : ", "} + "'" + file +
          "' using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '" + colour(i) + "' title " +
          gnuplot_quote(title);
}

// -- (a) accuracy against wall time -----------------------------------------------

report_plot accuracy_plot(const json& report) {
  report_plot p;
  p.title = "Test accuracy against wall time";
  std::string plot;
  std::vector<std::string> estimated;
  const auto& runs = report["runs"];
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& s = summary_of(runs[i]);
    std::string data;
    if (s.contains("curve") && s["curve"].is_array())
      for (const auto& point : s["curve"])
        data += number(number_at(point, "seconds").value_or(0)) + " " +
                number(100 * number_at(point, "test_accuracy").value_or(0)) + "\n";
    if (s.value("time_estimated", false))
      estimated.push_back(label_of(runs[i]));
    add_line(p, plot, "accuracy_" + std::to_string(i) + ".dat", data, i, label_of(runs[i]));
  }
  std::string target;
  if (auto t = number_at(report, "target"))
    target = "set arrow from graph 0, first " + number(100 * *t) + " to graph 1, first " +
             number(100 * *t) + " nohead dt 2 lc rgb '#555555'\nset label 'target' at graph 0.01, first " +
             number(100 * *t + 1.5) + "\n";
  p.figure.name = "accuracy";
  p.figure.commands = "set grid\nset key outside right top\nset xlabel 'wall time into training (s)'\n"
                      "set ylabel 'test accuracy (%)'\nset yrange [0:100]\nset xrange [0:*]\n" +
                      target + plot;
  p.caption = "Each run's test accuracy after every epoch of its first result row, at the "
              "seconds into training when the epoch was complete.";
  if (!estimated.empty()) {
    p.caption += " Runs whose metrics record no epoch times (--mode local before baton "
                 "recorded them): their training time is spread evenly over their epochs (";
    for (size_t i = 0; i < estimated.size(); ++i)
      p.caption += (i ? ", " : "") + estimated[i];
    p.caption += ").";
  }
  return p;
}

// -- (b, c) throughput and bytes per step -----------------------------------------

report_plot throughput_plot(const json& runs) {
  return bars(runs, "samples_per_second", 1,
              {"throughput", "Throughput",
               "Training samples per second of each run: its samples over its training time "
               "(setup excluded, evaluation included); a repeated run's median, its whisker "
               "the min-max of its runs."},
              "training samples per second", "%.0f");
}

/// Time to target of the runs that reached it (0 for the others: the
/// ranking says where they stand).
report_plot time_to_target_plot(const json& runs) {
  return bars(runs, "time_to_target_seconds", 1,
              {"time_to_target", "Time to target",
               "Seconds of training until the target accuracy was first reached (0: not "
               "reached); a repeated run's median, its whisker the min-max of its runs."},
              "seconds of training", "%.1f");
}

report_plot step_plot(const json& runs) {
  return bars(runs, "step_seconds", 1e-3,
              {"step", "Step time",
               "Training time per optimiser step; a repeated run's median, its whisker the "
               "min-max of its runs."},
              "ms per optimiser step", "%.1f");
}

report_plot bytes_plot(const json& runs) {
  double largest = 0;
  for (const auto& run : runs)
    largest = std::max(largest, number_at(summary_of(run), "bytes_per_step").value_or(0));
  auto [divisor, unit] = byte_unit(largest);
  return bars(runs, "bytes_per_step", divisor,
              {"bytes", "Bytes per step",
               "Bytes sent between the actors of different nodes per optimiser step, all nodes "
               "together (0: a run in one process)."},
              unit + " per step on the wire", "%.3g");
}

// -- (d) the time split ------------------------------------------------------------

report_plot split_plot(const json& runs) {
  std::string data;
  for (const auto& run : runs) {
    const auto& split = summary_of(run).value("time_split", json::object());
    data += bar_row(label_of(run), {100 * number_at(split, "compute").value_or(0),
                                    100 * number_at(split, "communication").value_or(0),
                                    100 * number_at(split, "waiting").value_or(0)});
  }
  return histogram({"split", "Where the time went",
                    "The trainable actors' time split into compute, communication and waiting "
                    "(a pipeline's bubble, a worker waiting for the others), in % of their time."},
                   data, "rowstacked",
                   "set boxwidth 0.6\nset yrange [0:105]\nset ylabel 'share of the time (%)'\n",
                   {{"compute", 0}, {"communication", 1}, {"waiting", 3}});
}

// -- (e) predicted against measured --------------------------------------------------

report_plot predicted_plot(const json& check) {
  std::string data;
  for (const auto& row : check["runs"])
    data += bar_row(row.value("label", ""), {1000 * row.value("measured_step_seconds", 0.0),
                                             1000 * row.value("predicted_step_seconds", 0.0)});
  return histogram({"predicted", "Predicted against measured step time",
                    "Each run's measured step time next to the cost model's prediction for the "
                    "same strategy, hosts and link; the errors are in the table."},
                   data, "clustered gap 1", "set ylabel 'step time (ms)'\n",
                   {{"measured", 0}, {"predicted", 1}});
}

// -- (f) the projection ---------------------------------------------------------------

/// Samples per second of a projection point (flat, or in its "predicted").
std::optional<double> point_rate(const json& point) {
  if (auto rate = number_at(point, "samples_per_second"))
    return rate;
  if (point.contains("predicted"))
    return number_at(point["predicted"], "samples_per_second");
  return std::nullopt;
}

/// The link rate of a projection point in bits per second: its
/// "bandwidth_bits", or its "bandwidth" in bytes per second.
std::optional<double> point_bits(const json& point) {
  if (auto bits = number_at(point, "bandwidth_bits"))
    return bits;
  if (auto bytes = number_at(point, "bandwidth"))
    return 8 * *bytes;
  return std::nullopt;
}

std::string rate_name(double bits_per_second) {
  return number(bits_per_second / 1e9) + " Gbit/s";
}

/// What the projection's caption says of the check: the strategies drawn
/// with error bars (their error), those not drawn (over the limit) and
/// those never measured.
std::string check_sentence(const std::map<std::string, double>& errors,
                           const std::set<std::string>& strategies) {
  std::string banded, dropped, unchecked;
  auto add = [](std::string& list, const std::string& item) {
    list += (list.empty() ? "" : ", ") + item;
  };
  for (const auto& strategy : strategies) {
    auto it = errors.find(strategy);
    if (it == errors.end())
      add(unchecked, strategy);
    else if (it->second > drawn_error_limit)
      add(dropped, strategy + " (" + fixed(it->second, 1) + "%)");
    else
      add(banded, strategy + " +/-" + fixed(it->second, 1) + "%");
  }
  std::string out;
  if (!banded.empty())
    out += " The bars around a point span its strategy's step-time error in the measured "
           "check: " + banded + ".";
  if (!dropped.empty())
    out += " Not drawn: " + dropped + ", whose measured check is off by more than " +
           fixed(drawn_error_limit, 0) + "%, so their projection would say nothing.";
  if (!unchecked.empty())
    out += " Without error bars (no run of theirs to check against): " + unchecked + ".";
  return out;
}

/// One plot per bandwidth of the projection: samples/s against hosts, a
/// line per strategy with error bars of its check error; a strategy whose
/// check is off by more than drawn_error_limit is left out (`errors`:
/// check_errors of the runs).
std::vector<report_plot> projection_plots(const json& points,
                                          const std::map<std::string, double>& errors) {
  struct line {
    std::string data, band;
  };
  std::map<double, std::map<std::string, line>> by_bandwidth; // bits/s: lines per strategy
  std::set<std::string> strategies;
  for (const auto& point : points) {
    auto bandwidth = point_bits(point);
    auto hosts = number_at(point, "hosts");
    auto rate = point_rate(point);
    const std::string strategy = point.value("strategy", "?");
    strategies.insert(strategy);
    auto error = errors.find(strategy);
    // Log axes: a point at 0 hosts or 0 samples/s has no place on them.
    if (!bandwidth || !hosts || !rate || *hosts <= 0 || *rate <= 0 ||
        (error != errors.end() && error->second > drawn_error_limit))
      continue;
    auto& l = by_bandwidth[*bandwidth][strategy];
    l.data += number(*hosts) + " " + number(*rate) + "\n";
    if (error != errors.end()) {
      const double e = error->second / 100;
      l.band += number(*hosts) + " " + number(*rate) + " " + number(*rate / (1 + e)) + " " +
                number(*rate * (1 + e)) + "\n";
    }
  }
  const std::string said = check_sentence(errors, strategies);
  std::vector<report_plot> plots;
  for (const auto& [bandwidth, lines] : by_bandwidth) {
    report_plot p;
    p.figure.name = "projection_" + std::to_string(plots.size());
    p.title = "Projection at " + rate_name(bandwidth);
    std::string plot, bands;
    size_t i = 0;
    for (const auto& [strategy, l] : lines) {
      if (!l.band.empty()) {
        const auto file = p.figure.name + "_band_" + std::to_string(i) + ".dat";
        p.figure.data.emplace_back(file, l.band);
        // Error bars: a projection to one host count is one point.
        bands += std::string{bands.empty() ? "" : ", "} + "'" + file +
                 "' using 1:2:3:4 with yerrorbars pt 0 lw 1 lc rgb '" + colour(i) + "' notitle";
      }
      add_line(p, plot, p.figure.name + "_" + std::to_string(i) + ".dat", l.data, i, strategy);
      ++i;
    }
    // The error bars first, under the lines.
    if (!bands.empty())
      plot = "plot " + bands + ", " + plot.substr(5);
    p.figure.commands = "set grid\nset logscale x 2\nset logscale y 10\n"
                        "set key outside right top\nset xlabel 'hosts'\n"
                        "set ylabel 'predicted samples per second'\n" + plot;
    p.caption = "The cost model's samples per second of each strategy on more hosts, every "
                "link at " + rate_name(bandwidth) + " (predicted, not run)." + said;
    plots.push_back(std::move(p));
  }
  return plots;
}

// -- what gnuplot can draw ------------------------------------------------------------

/// The values of a data file's line: its fields after the label (a bar
/// row's first field, double-quoted by gnuplot_field, has no quote inside).
std::vector<double> line_values(const std::string& line) {
  size_t at = 0;
  if (!line.empty() && line.front() == '"')
    at = line.find('"', 1) == std::string::npos ? line.size() : line.find('"', 1) + 1;
  std::vector<double> values;
  std::istringstream fields(line.substr(at));
  for (std::string field; fields >> field;)
    values.push_back(std::strtod(field.c_str(), nullptr));
  return values;
}

/// Why `p` cannot be drawn, or "": a figure without a single data line
/// (gnuplot: "x range is invalid"), or a value beyond max_plotted.
std::string undrawable(const report_plot& p) {
  size_t lines = 0;
  for (const auto& [file, data] : p.figure.data) {
    std::istringstream rows(data);
    for (std::string row; std::getline(rows, row);) {
      if (row.empty())
        continue;
      ++lines;
      for (double x : line_values(row))
        if (!std::isfinite(x) || std::fabs(x) > max_plotted)
          return "a value of " + number(x) + " in " + file + " is beyond what a plot can show "
                 "(at most " + number(max_plotted) + "); the figures are in the table and "
                 "report.json";
    }
  }
  if (lines == 0)
    return "nothing to draw: no run has an epoch with a test accuracy";
  return "";
}

} // namespace

std::vector<report_plot> report_plots(const json& report) {
  std::vector<report_plot> plots;
  const auto& runs = report.at("runs");
  if (runs.empty())
    return plots;
  plots.push_back(accuracy_plot(report));
  plots.push_back(time_to_target_plot(runs));
  plots.push_back(throughput_plot(runs));
  plots.push_back(step_plot(runs));
  plots.push_back(bytes_plot(runs));
  plots.push_back(split_plot(runs));
  // The check report.cpp made of these runs (prediction_check).
  const auto check = report.value("prediction_check", json{});
  if (!check.is_null())
    plots.push_back(predicted_plot(check));
  if (report.contains("predictions") && report["predictions"].is_object()) {
    auto projection = report["predictions"].value("projection", json::array());
    if (projection.is_array())
      for (auto& p : projection_plots(projection, check_errors(check)))
        plots.push_back(std::move(p));
  }
  for (auto& p : plots)
    if (p.omitted = undrawable(p); !p.omitted.empty())
      p.caption = "Not drawn: " + p.omitted + ". " + p.caption;
  return plots;
}

} // namespace baton::apps

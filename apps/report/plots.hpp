#pragma once

// The plots of a report, as gnuplot figures made from its JSON: accuracy
// against wall time, throughput, bytes per step, the time split, predicted
// against measured step time, and the cost model's projection.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/report/gnuplot.hpp"

namespace baton::apps {

/// A plot of the report: what gnuplot draws and what the page says of it.
struct report_plot {
  gnuplot_figure figure;
  std::string title;   ///< the heading above it
  std::string caption; ///< below it: what is drawn, from which figures
  /// Why it is not drawn ("" = drawn): nothing to draw (no run has an epoch
  /// with a test accuracy), or a value gnuplot cannot place on an axis
  /// (beyond max_plotted). The page shows the title and this instead.
  std::string omitted;
};

/// The largest magnitude a plot draws: gnuplot's axes fail on values near a
/// double's limit ("x range is invalid" at 1e308).
inline constexpr double max_plotted = 1e15;

/// The plots of `report` (the prediction plots only with predictions and
/// its "prediction_check"), in
/// the page's order; those with nothing to draw or a value beyond
/// max_plotted have `omitted` set and are not given to gnuplot.
std::vector<report_plot> report_plots(const nlohmann::json& report);

} // namespace baton::apps

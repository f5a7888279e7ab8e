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
};

/// The plots of `report` that have something to draw (the prediction plots
/// only with predictions), in the page's order.
std::vector<report_plot> report_plots(const nlohmann::json& report);

} // namespace baton::apps

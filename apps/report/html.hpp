#pragma once

// The report as one self-contained HTML page: no script, no style sheet,
// font or image to fetch; the plots are gnuplot's SVG inlined.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/report/plots.hpp"

namespace baton::apps {

/// `text` with &, <, >, " and ' replaced by their entities.
std::string html_escape(const std::string& text);

/// The page of `report` (as write_report completes it: ranking and
/// prediction check included) with `plots` drawn as `svgs` (one each, in
/// order, as gnuplot wrote them).
std::string report_page(const nlohmann::json& report, const std::vector<report_plot>& plots,
                        const std::vector<std::string>& svgs);

} // namespace baton::apps

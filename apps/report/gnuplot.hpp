#pragma once

// Plots drawn by gnuplot (Debian: gnuplot-nox) as SVG: the report writes a
// script and its data files to a temporary directory, runs gnuplot once as a
// child process and reads the SVGs back, ready to inline into a page.

#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

namespace baton::apps {

/// One plot: its data files and the gnuplot commands that draw it.
struct gnuplot_figure {
  std::string name;   ///< a file-name stem, unique in a report ("accuracy")
  /// Data files: name (relative to the temporary directory) and contents.
  std::vector<std::pair<std::string, std::string>> data;
  /// Commands after the terminal and output lines: settings and one `plot`.
  /// They name the data files as given in `data`.
  std::string commands;
  int width = 640;  ///< SVG size in pixels (the page scales it to its column)
  int height = 400;
};

/// Draws every figure with one gnuplot run in a fresh temporary directory
/// (removed after), in order: the SVG text of each. Errors: gnuplot missing
/// (bad_file, naming the package gnuplot-nox), gnuplot failed or ran over a
/// minute (compute_failed, with its messages).
caf::expected<std::vector<std::string>> draw_svg(const std::vector<gnuplot_figure>& figures);

/// `svg` as an element of an HTML page: without its XML header and
/// namespace declarations (HTML knows them: nothing to fetch), and with
/// every id (and reference to one) prefixed by `prefix`, so that several
/// plots in one page do not share ids.
std::string inline_svg(const std::string& svg, const std::string& prefix);

/// `text` as a gnuplot string literal ('...' with '' for a quote).
std::string gnuplot_quote(const std::string& text);

/// `text` as one field of a gnuplot data file: double-quoted, with quotes
/// and line breaks made harmless.
std::string gnuplot_field(const std::string& text);

} // namespace baton::apps

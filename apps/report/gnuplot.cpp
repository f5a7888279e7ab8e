#include "apps/report/gnuplot.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "actors/runtime/child_process.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace {

namespace fs = std::filesystem;

/// gnuplot may take this long for a report's plots (it takes well under a
/// second): beyond it, it is stopped rather than left to hang the command.
constexpr auto gnuplot_limit = std::chrono::seconds(60);

/// The executable `name` found on $PATH; "" when there is none.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs{path ? path : "/usr/bin:/bin"};
  for (std::string dir; std::getline(dirs, dir, ':');) {
    auto candidate = (dir.empty() ? std::string{"."} : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate))
      return candidate;
  }
  return {};
}

/// A fresh directory under $TMPDIR (or /tmp), removed with this object.
class temp_dir {
public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string{base && *base ? base : "/tmp"} + "/baton-report-XXXXXX";
    if (::mkdtemp(pattern.data()))
      path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    if (!path_.empty())
      fs::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
  return static_cast<bool>(out);
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The script drawing every figure to DIR/NAME.svg: one terminal, one
/// output per figure; gnuplot runs with DIR as its working directory.
std::string script_of(const std::vector<gnuplot_figure>& figures, const std::string& dir) {
  std::string script = "cd " + gnuplot_quote(dir) + "\n";
  for (const auto& f : figures) {
    script += "reset\n";
    // noenhanced: labels are strategy and file names, whose _ and ^ are not
    // sub- and superscripts.
    script += "set terminal svg size " + std::to_string(f.width) + "," +
              std::to_string(f.height) +
              " dynamic noenhanced font 'sans,11' background '#ffffff'\n";
    script += "set output " + gnuplot_quote(f.name + ".svg") + "\n";
    script += f.commands + "\nset output\n";
  }
  return script;
}

/// Runs gnuplot on `script` and waits at most gnuplot_limit.
caf::expected<void> run_gnuplot(const std::string& gnuplot, const std::string& script,
                                const std::string& log) {
  auto child = actors::child_process::start({gnuplot, script}, log);
  if (!child)
    return child.error();
  auto deadline = std::chrono::steady_clock::now() + gnuplot_limit;
  while (child->running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (child->running()) {
    child->stop();
    return make_error(errc::compute_failed, "gnuplot ran over a minute drawing the report; "
                                            "stopped. Its messages:\n" + child->log_tail());
  }
  if (auto code = child->wait(); code != 0)
    return make_error(errc::compute_failed, "gnuplot failed (exit code " + std::to_string(code) +
                                              ") drawing the report:\n" + child->log_tail());
  return {};
}

} // namespace

caf::expected<std::vector<std::string>> draw_svg(const std::vector<gnuplot_figure>& figures) {
  auto gnuplot = find_on_path("gnuplot");
  if (gnuplot.empty())
    return make_error(errc::bad_file,
                      "gnuplot not found on PATH: the report's plots are drawn by gnuplot; "
                      "install the Debian package gnuplot-nox (scripts/install-deps.sh does)");
  temp_dir dir;
  if (dir.path().empty())
    return make_error(errc::bad_file, "cannot make a temporary directory for gnuplot's files");
  for (const auto& f : figures)
    for (const auto& [name, text] : f.data)
      if (!write_file(dir.path() + "/" + name, text))
        return make_error(errc::bad_file, "cannot write " + dir.path() + "/" + name);
  auto script = dir.path() + "/report.gp";
  if (!write_file(script, script_of(figures, dir.path())))
    return make_error(errc::bad_file, "cannot write " + script);
  if (auto done = run_gnuplot(gnuplot, script, dir.path() + "/gnuplot.log"); !done)
    return done.error();
  std::vector<std::string> svgs;
  for (const auto& f : figures) {
    auto svg = read_file(dir.path() + "/" + f.name + ".svg");
    if (svg.find("</svg>") == std::string::npos)
      return make_error(errc::compute_failed, "gnuplot wrote no complete SVG for " + f.name);
    svgs.push_back(std::move(svg));
  }
  return svgs;
}

std::string inline_svg(const std::string& svg, const std::string& prefix) {
  auto start = svg.find("<svg");
  auto out = start == std::string::npos ? svg : svg.substr(start);
  static const std::regex xmlns{R"(\s+xmlns(:\w+)?=(["'])[^"']*\2)"};
  static const std::regex id{R"(\bid=(["']))"};
  static const std::regex href{R"(href=(["'])#)"};
  static const std::regex url{R"(url\(#)"};
  out = std::regex_replace(out, xmlns, "");
  out = std::regex_replace(out, id, "id=$1" + prefix);
  out = std::regex_replace(out, href, "href=$1#" + prefix);
  return std::regex_replace(out, url, "url(#" + prefix);
}

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "''";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

std::string gnuplot_field(const std::string& text) {
  std::string out = "\"";
  for (char c : text)
    out += (c == '"' ? '\'' : (c == '\n' || c == '\r' || c == '\t') ? ' ' : c);
  return out + "\"";
}

} // namespace baton::apps

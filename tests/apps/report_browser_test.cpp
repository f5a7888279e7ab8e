// report.html in a real browser (issue 24 item 1): headless Chromium
// (Debian's chromium) loads the report of two real tiny runs from disk,
// its rendered DOM has every plot as an SVG with drawn paths, and its
// screenshot (build/tests/artifacts/report.png, kept as the test's
// artefact) is a real page, far from a blank one. Every chromium is
// started under `timeout` in its own process group and none is left.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "tests/apps/report_fixture.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

constexpr const char* chromium = "/usr/bin/chromium";

/// Chromium loads a local page in a second or two; beyond this it is
/// stopped (SIGTERM to its whole process group, SIGKILL 5 s later).
constexpr int chromium_limit_seconds = 90;

/// `chromium --headless ... FLAGS file://PAGE` with a profile of its own
/// in `profile`, under `timeout`; its stdout (stderr apart: its dbus noise).
command_output run_chromium(const std::string& profile, const std::string& flags,
                            const std::string& page) {
  return run_shell("timeout -k 5 " + std::to_string(chromium_limit_seconds) + " " + chromium +
                   " --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars "
                   "--user-data-dir=" + quote(profile) + " " + flags + " " +
                   quote("file://" + page) + " 2>" + quote(profile + ".log"));
}

/// Width and height of the PNG at `path` (its IHDR); {0, 0} when it is none.
std::pair<uint32_t, uint32_t> png_size(const std::string& text) {
  if (text.size() < 24 || text.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0)
    return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i)
      v = v << 8 | static_cast<unsigned char>(text[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

/// How many processes still run with `profile` on their command line (the
/// pattern's [r] keeps it from matching the shell that runs pgrep).
int chromiums_left(const std::string& profile) {
  auto out = run_shell("pgrep -c -f -- " + quote("user-data-di[r]=" + profile));
  return std::atoi(out.text.c_str());
}

class report_browser : public ::testing::Test {
protected:
  void SetUp() override {
    if (::access(chromium, X_OK) != 0)
      GTEST_SKIP() << chromium << " is absent: install the Debian package chromium "
                                  "(scripts/install-deps.sh) to render the report";
  }
};

} // namespace

TEST_F(report_browser, renders_every_plot_and_takes_a_screenshot) {
  scratch_dir dir{"report-browser"};
  auto out = make_tiny_report(dir);
  ASSERT_FALSE(out.empty());
  auto page = out + "/report.html";
  auto profile = dir.path() + "/chromium";

  auto dom = run_chromium(profile, "--dump-dom", page);
  ASSERT_EQ(dom.exit_code, 0) << read_text(profile + ".log");
  auto plots = read_json(out + "/report.json")["plots"];
  ASSERT_GE(plots.size(), 4u);
  for (const auto& plot : plots) {
    auto at = dom.text.find("id=\"plot-" + plot["name"].get<std::string>() + "\"");
    ASSERT_NE(at, std::string::npos) << plot["name"] << " is not in the rendered page";
    auto figure = dom.text.substr(at, dom.text.find("</figure>", at) - at);
    EXPECT_TRUE(contains(figure, "<svg")) << plot["name"];
    EXPECT_TRUE(contains(figure, "<path") || contains(figure, "<polyline")) << plot["name"];
  }
  EXPECT_TRUE(contains(dom.text, "<table id=\"ranking\">"));

  std::filesystem::create_directories(BATON_ARTIFACTS_DIR);
  auto shot = std::string{BATON_ARTIFACTS_DIR} + "/report.png";
  std::filesystem::remove(shot);
  auto taken = run_chromium(profile, "--screenshot=" + quote(shot) + " --window-size=1280,2400",
                            page);
  ASSERT_EQ(taken.exit_code, 0) << read_text(profile + ".log");
  auto png = read_text(shot);
  EXPECT_EQ(png_size(png), std::make_pair(1280u, 2400u));

  // A blank page of the same size compresses to a few KiB: the report's
  // text, table and plots make many times more.
  std::ofstream{dir.path() + "/blank.html"} << "<!DOCTYPE html><html><body></body></html>";
  auto blank_shot = dir.path() + "/blank.png";
  run_chromium(profile, "--screenshot=" + quote(blank_shot) + " --window-size=1280,2400",
               dir.path() + "/blank.html");
  auto blank = read_text(blank_shot);
  ASSERT_FALSE(blank.empty());
  EXPECT_GT(png.size(), 5 * blank.size()) << "report " << png.size() << " bytes, blank "
                                          << blank.size();
  std::cout << "screenshot: " << shot << " (" << png.size() << " bytes)\n";
  EXPECT_EQ(chromiums_left(profile), 0);
}

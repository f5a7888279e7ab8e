#pragma once

// What report_test and report_browser_test share: two real tiny runs of
// the data-parallel workload (over two node processes, and --mode local)
// and their report made by the real `baton report`.

#include <string>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"

namespace baton::testing {

/// The tiny runs' arguments: 2 epochs of 256 samples, 200 test samples.
inline std::vector<std::string> tiny_data_parallel() {
  return {"run",         source_path("configs/data-parallel.yaml"),
          "--set",       "data.train_limit=256",
          "--set",       "data.test_limit=200",
          "--set",       "data.epochs=2"};
}

/// Runs `baton ARGS... --metrics-out DIR/NAME.json`; its path, or "" (and
/// a test failure with baton's output) when it failed.
inline std::string tiny_run(const scratch_dir& dir, std::vector<std::string> args,
                            const std::string& name) {
  auto path = dir.path() + "/" + name + ".json";
  auto out = run_baton(with(std::move(args), {"--metrics-out", path}));
  EXPECT_EQ(out.exit_code, 0) << out.text;
  return out.exit_code == 0 ? path : "";
}

/// Makes DIR/ring.json (2 workers on 2 local node processes) and
/// DIR/local.json (--mode local), then `baton report` of both into
/// DIR/report; "" (and a test failure) when a step failed.
inline std::string make_tiny_report(const scratch_dir& dir) {
  auto ring = tiny_run(dir, with(tiny_data_parallel(), {"--local-nodes", "2"}), "ring");
  auto local = tiny_run(dir, with(tiny_data_parallel(), {"--mode", "local"}), "local");
  if (ring.empty() || local.empty())
    return "";
  auto out = run_baton({"report", ring, local, "--out", dir.path() + "/report"});
  EXPECT_EQ(out.exit_code, 0) << out.text;
  return out.exit_code == 0 ? dir.path() + "/report" : "";
}

} // namespace baton::testing

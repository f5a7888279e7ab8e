// Bad topology files, as a user meets them: exit code 2 and a message naming
// the file, the line and what was expected.

#include <fstream>

#include <gtest/gtest.h>

#include "tests/actors/baton_process.hpp"

using namespace baton::testing;

namespace {

std::string write_topology(const std::string& name, const std::string& text) {
  auto path = temp_dir("bad") + "/" + name + ".yaml";
  std::ofstream{path} << text;
  return path;
}

const char* valid_prefix = R"(job: transfer
data: {dataset: synthetic, synthetic_train: 64, synthetic_test: 32, batch_size: 16}
backbone: {model: convnet, checkpoint: "", split: [pool1]}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: all10, task: all10}
)";

} // namespace

TEST(bad_topology, unknown_key_names_file_and_line) {
  auto path = write_topology("unknown", std::string{valid_prefix} + "runtime:\n  windw: 4\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("windw"), std::string::npos) << out.text;
}

TEST(bad_topology, wrong_type_names_file_and_line) {
  auto path = write_topology("type", std::string{valid_prefix} + "runtime:\n  window: four\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("four"), std::string::npos) << out.text;
}

TEST(bad_topology, missing_file) {
  auto out = run_baton({"run", "/nonexistent/topology.yaml"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("/nonexistent/topology.yaml"), std::string::npos) << out.text;
}

TEST(bad_topology, split_point_out_of_range) {
  std::string text = valid_prefix;
  text.replace(text.find("[pool1]"), 7, "[pool9]");
  auto path = write_topology("split", text);
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":3"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("pool9"), std::string::npos) << out.text;
}

TEST(bad_topology, unreachable_node) {
  // Port 1 on loopback: nothing listens there for an unprivileged service.
  auto path = write_topology("node", std::string{valid_prefix} +
                                       "nodes:\n  - {name: n1, host: 127.0.0.1, port: 1}\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9: node 'n1'"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("unreachable"), std::string::npos) << out.text;
}

TEST(bad_topology, bad_override) {
  auto out = run_baton({"run", source_path("configs/transfer.yaml"), "--set", "data.epochs=x"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("data.epochs"), std::string::npos) << out.text;
}

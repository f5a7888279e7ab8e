// The run request's topology (actors/modes/run.cpp): read once. A caller
// that has read the file already (`baton launch`: every rank reads it for
// the node names, rank 0 then runs the job) hands its text over, and the
// job is parsed from that text, not from the file as it is by then.

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "actors/modes/registry.hpp"
#include "actors/runtime/jobs.hpp"
#include "messages/errc.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::actors;
using baton::describe;
using baton::testing::read_text;
using baton::testing::scratch_dir;

namespace {

const std::string request_configs = std::string(BATON_SOURCE_DIR) + "/configs/";

void overwrite_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

} // namespace

TEST(run_request, the_text_the_caller_read_is_parsed_not_the_file_as_it_is_now) {
  scratch_dir dir("run-request");
  const std::string path = dir.path() + "/pipeline.yaml";
  const std::string text = read_text(request_configs + "pipeline.yaml");
  ASSERT_FALSE(text.empty());
  overwrite_file(path, "job: [edited after it was read\n");

  run_request r;
  r.topology_path = path;
  r.topology_text = text;
  auto t = load_request_topology(r);
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->job, "pipeline");
  EXPECT_EQ(t->text, text);
  EXPECT_EQ(t->file, path); // errors and relative paths still name the file

  // Without the text, the file is read: the edited one, refused.
  r.topology_text.clear();
  auto edited = load_request_topology(r);
  ASSERT_FALSE(edited);
  EXPECT_NE(describe(edited.error()).find(path), std::string::npos) << describe(edited.error());
}

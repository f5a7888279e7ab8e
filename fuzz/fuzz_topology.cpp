// Fuzz target: the bytes as YAML text for the two config parsers a user
// reaches, the topology (actors/config/topology.hpp, what `baton run` reads) and
// node.yaml (actors/runtime/node.hpp, what `baton node --config` reads).
//
// Lines "#set dotted.key=value" (YAML comments) are also passed as `--set`
// overrides. Bad text must be a bad_config error: an exception, a crash, a
// sanitizer report or a hang fails the run.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "actors/config/topology.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/runtime/node.hpp"
#include "messages/errc.hpp"

namespace {

[[noreturn]] void fail(const char* parser, const std::string& what) {
  std::fprintf(stderr, "fuzz_topology: %s: %s\n", parser, what.c_str());
  std::abort();
}

/// The `--set` overrides of `text`: its lines that start with "#set ".
std::vector<std::string> overrides_of(const std::string& text) {
  static const std::string prefix = "#set ";
  std::vector<std::string> overrides;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.compare(0, prefix.size(), prefix) == 0)
      overrides.push_back(line.substr(prefix.size()));
  return overrides;
}

/// An error must be a bad_config value that says something.
void check_error(const caf::error& err, const char* parser) {
  if (err != baton::errc::bad_config)
    fail(parser, "expected a bad_config error, got " + baton::describe(err));
  if (baton::describe(err).size() <= std::string{"bad_config: "}.size())
    fail(parser, "bad_config error without a message");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // No try: an exception that escapes a parser terminates the run with the
  // stack of its throw.
  auto topology = baton::actors::parse_topology(text, "fuzz.yaml", overrides_of(text),
                                                baton::actors::all_job_schemas());
  if (!topology)
    check_error(topology.error(), "parse_topology");
  else
    (void) baton::actors::with_local_nodes(*topology, 3);
  auto node = baton::actors::parse_node_settings(text, "node.yaml");
  if (!node)
    check_error(node.error(), "parse_node_settings");
  return 0;
}

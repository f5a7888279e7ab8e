#pragma once

// The topologies unit suites write in YAML: a small job with the section
// under test, parsed as a user's file would be (with every mode's schema),
// and the refusal or the plan a test expects of it. One place that calls
// the topology readers and the planner for the suites of every mode.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::testing {

/// `data:` of a small job: 192 synthetic samples (64 to test) in
/// minibatches of 16, one epoch; a flow map on two lines.
extern const char* const small_synthetic_data;

/// The end of a small transfer job, after its `data:` (5 lines): the
/// convnet split after pool1 (no checkpoint), the task all10 (the ten
/// classes) and its head.
extern const char* const small_transfer_end;

/// The YAML of a small test job up to its strategy's section: line 1 a
/// comment (naming JOB without `job:`, so that a test may find and replace
/// line 2), line 2 `job: JOB`, line 3 `seed: 7`, then `data: DATA` and
/// `backbone: BACKBONE` (each as many lines as it has), the task all10 (the
/// ten classes) and its head (3 lines), and last `SECTION:` alone on its
/// line; the section's keys follow.
std::string small_job_topology(const std::string& job, const std::string& section,
                               const std::string& backbone,
                               const std::string& data = small_synthetic_data);

/// A topology under test: fixed YAML (`head`) followed by the text a test
/// varies (a section's keys, a key after them), read as the file `file`:
/// errors name FILE:LINE.
class topology_fixture {
public:
  topology_fixture(std::string file, std::string head);

  /// `head` followed by `rest`.
  std::string text(const std::string& rest) const;
  /// The topology of text(rest), or why it is refused.
  caf::expected<actors::topology> parse(const std::string& rest) const;
  /// The topology of the whole `yaml` (text() with a line changed), read as
  /// the same file.
  caf::expected<actors::topology> parse_text(const std::string& yaml) const;
  /// The error text of text(rest); a test failure and "" when it parses.
  std::string refusal(const std::string& rest) const;
  /// The plan of text(rest) (see plan_or_fail).
  actors::job_plan plan_for(const std::string& rest, int32_t local_nodes = 0) const;

private:
  std::string file_;
  std::string head_;
};

/// The plan of `t`, placed on `local_nodes` local nodes n1..nN when that is
/// over 0; a test failure and an empty plan when `t` is an error or its mode
/// refuses to plan it.
actors::job_plan plan_or_fail(const caf::expected<actors::topology>& t,
                              int32_t local_nodes = 0);

} // namespace baton::testing

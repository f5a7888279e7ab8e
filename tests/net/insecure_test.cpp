// `baton node` without TLS beyond loopback: refused unless --insecure (a
// plain port lets anyone who reaches it spawn actors; docs/security.md).
// Only the refusals run here: a test listens on 127.0.0.1 alone.

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"

using namespace baton::testing;

TEST(insecure, a_node_beyond_loopback_without_tls_refuses_to_start) {
  for (const char* host : {"0.0.0.0", "::", "192.0.2.1"}) {
    auto out = run_baton({"node", "--name", "n1", "--host", host, "--port", "0"});
    EXPECT_EQ(out.exit_code, 2) << host << ": " << out.text;
    EXPECT_NE(out.text.find("not a loopback address"), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("--insecure"), std::string::npos) << out.text;
    EXPECT_EQ(out.text.find("listening on"), std::string::npos) << out.text;
  }
}

TEST(insecure, insecure_lets_it_past_the_check) {
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: with --insecure the
  // node gets past the TLS check and fails only at listening.
  auto out = run_baton({"node", "--name", "n1", "--host", "192.0.2.1", "--port", "0", "--insecure"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_EQ(out.text.find("not a loopback address"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("cannot listen on 192.0.2.1"), std::string::npos) << out.text;
}

// The rendezvous of `baton launch` over real sockets on 127.0.0.1: rank 0
// gathers the others' nodes, tells them the exit code, and each side sees
// the other's process end at once.

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "actors/runtime/rendezvous.hpp"
#include "messages/errc.hpp"

using namespace baton;
using namespace baton::actors;
using namespace std::chrono_literals;

namespace {

/// A rendezvous host on 127.0.0.1, on a port chosen by the OS.
std::pair<std::unique_ptr<rendezvous_host>, uint16_t> any_host() {
  auto host = rendezvous_host::listen(0, true);
  EXPECT_TRUE(host) << describe(host.error());
  if (!host)
    return {nullptr, 0};
  auto port = (*host)->port();
  return {std::move(*host), port};
}

std::unique_ptr<rendezvous_guest> joined(uint16_t port, const launch_peer& self, int32_t world,
                                         const std::atomic<bool>& stop) {
  auto guest = rendezvous_guest::join("127.0.0.1", port, self, world, 10s, stop);
  EXPECT_TRUE(guest) << describe(guest.error());
  return guest ? std::move(*guest) : nullptr;
}

} // namespace

TEST(rendezvous, registration_lines_round_trip_and_bad_ones_are_refused) {
  launch_peer p{2, "n2", "10.0.0.3", 7001};
  auto back = parse_registration(registration_line(p, 3), 3);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->name, "n2");
  EXPECT_EQ(back->host, "10.0.0.3");
  EXPECT_EQ(back->port, 7001);
  launch_peer unset{1, "n1", "", 7002};
  EXPECT_EQ(parse_registration(registration_line(unset, 3), 3)->host, "");
  auto other_world = parse_registration(registration_line(p, 4), 3);
  ASSERT_FALSE(other_world);
  EXPECT_NE(context_of(other_world.error()).find("world size of 4, rank 0 with 3"),
            std::string::npos);
  EXPECT_FALSE(parse_registration("GET / HTTP/1.1", 3));
  EXPECT_FALSE(parse_registration("baton-launch 1 0 3 n0 - 7000", 3)); // rank 0 registers no one
  EXPECT_FALSE(parse_registration("baton-launch 1 1 3 bad/name - 7000", 3));
}

// Rank 0 learns every rank's node (a host left out is the address it
// connected from), each rank gets the exit code.
TEST(rendezvous, rank_0_gathers_the_nodes_and_sends_the_exit_code) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto second = std::async(std::launch::async, [&, port = port] {
    auto guest = joined(port, {2, "n2", "", 7002}, 3, stop);
    return guest ? guest->wait(stop) : caf::expected<int>{caf::error{}};
  });
  auto first = std::async(std::launch::async, [&, port = port] {
    auto guest = joined(port, {1, "n1", "127.0.0.7", 7001}, 3, stop);
    return guest ? guest->wait(stop) : caf::expected<int>{caf::error{}};
  });
  auto peers = host->gather(3, 10s, stop);
  ASSERT_TRUE(peers) << describe(peers.error());
  ASSERT_EQ(peers->size(), 2u);
  EXPECT_EQ((*peers)[0].name, "n1");
  EXPECT_EQ((*peers)[0].host, "127.0.0.7");
  EXPECT_EQ((*peers)[0].port, 7001);
  EXPECT_EQ((*peers)[1].name, "n2");
  EXPECT_EQ((*peers)[1].host, "127.0.0.1");
  EXPECT_EQ(host->own_address(), "127.0.0.1");
  EXPECT_FALSE(host->lost(50ms));
  host->finish(3);
  auto a = first.get(), b = second.get();
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, 3);
  EXPECT_EQ(*b, 3);
}

TEST(rendezvous, a_rank_that_leaves_is_seen_by_rank_0_and_rank_0_leaving_by_the_others) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto leaving = joined(port, {1, "n1", "", 7001}, 3, stop);
  auto staying = joined(port, {2, "n2", "", 7002}, 3, stop);
  ASSERT_TRUE(host->gather(3, 10s, stop));
  leaving.reset();
  std::optional<int32_t> lost;
  for (int i = 0; i < 100 && !lost; ++i)
    lost = host->lost(100ms);
  EXPECT_EQ(lost, std::optional<int32_t>{1});
  host.reset();
  auto code = staying->wait(stop);
  ASSERT_FALSE(code);
  EXPECT_EQ(code.error(), errc::node_unreachable);
  EXPECT_NE(context_of(code.error()).find("lost rank 0"), std::string::npos);
}

// The second of two registrations as rank 1 is told why; the other learns
// that rank 0 is gone when it ends.
TEST(rendezvous, a_duplicate_rank_is_refused_on_both_sides) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto one = joined(port, {1, "n1", "", 7001}, 3, stop);
  auto two = joined(port, {1, "n1b", "", 7002}, 3, stop);
  auto peers = host->gather(3, 10s, stop);
  ASSERT_FALSE(peers);
  EXPECT_NE(context_of(peers.error()).find("two processes registered as rank 1"),
            std::string::npos);
  host.reset();
  auto first = one->wait(stop), second = two->wait(stop);
  ASSERT_FALSE(first);
  ASSERT_FALSE(second);
  auto refused = first.error() == errc::bad_config ? first.error() : second.error();
  auto other = first.error() == errc::bad_config ? second.error() : first.error();
  EXPECT_EQ(refused, errc::bad_config);
  EXPECT_NE(context_of(refused).find("rank 0 refused this rank: two processes registered as "
                                     "rank 1"),
            std::string::npos)
    << context_of(refused);
  EXPECT_EQ(other, errc::node_unreachable);
}

TEST(rendezvous, waiting_ends_at_the_limit_or_when_stopped) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto timed_out = host->gather(2, 1s, stop);
  ASSERT_FALSE(timed_out);
  EXPECT_NE(context_of(timed_out.error()).find("1 of 1 ranks did not register within 1 s"),
            std::string::npos);
  stop = true;
  auto stopped = host->gather(2, 10s, stop);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error(), errc::interrupted);
  host.reset();
  auto nobody = rendezvous_guest::join("127.0.0.1", port, {1, "n1", "", 7001}, 2, 1s,
                                       std::atomic<bool>{false});
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.error(), errc::node_unreachable);
}

TEST(rendezvous, a_port_in_use_says_address_in_use) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  auto again = rendezvous_host::listen(port, true);
  ASSERT_FALSE(again);
  EXPECT_NE(context_of(again.error()).find("address in use"), std::string::npos);
}

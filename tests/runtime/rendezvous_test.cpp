// The rendezvous of `baton launch` over real sockets on 127.0.0.1: rank 0
// gathers the others' nodes, tells them the exit code, and each side sees
// the other's process end at once.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.hpp"

#include "actors/net/certs.hpp"
#include "actors/runtime/rendezvous.hpp"
#include "messages/errc.hpp"

using namespace baton;
using namespace baton::actors;
using baton::testing::scratch_dir;
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
  auto back = parse_registration(registration_line(p, 3, "job-7", "proof"));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->peer.rank, 2);
  EXPECT_EQ(back->peer.name, "n2");
  EXPECT_EQ(back->peer.host, "10.0.0.3");
  EXPECT_EQ(back->peer.port, 7001);
  EXPECT_EQ(back->world_size, 3);
  EXPECT_EQ(back->job_id, "job-7");
  EXPECT_EQ(back->proof, "proof");
  EXPECT_EQ(back->text, registration_text(p, 3, "job-7"));
  EXPECT_FALSE(check_registration(*back, 3));
  launch_peer unset{1, "n1", "", 7002};
  auto none = parse_registration(registration_line(unset, 3));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->peer.host, "");
  EXPECT_EQ(none->job_id, "");
  EXPECT_EQ(none->proof, "");
  auto other_world = check_registration(*parse_registration(registration_line(p, 4)), 3);
  ASSERT_TRUE(other_world);
  EXPECT_NE(context_of(other_world).find("world size of 4, rank 0 with 3"), std::string::npos);
  EXPECT_FALSE(parse_registration("GET / HTTP/1.1"));
  EXPECT_FALSE(parse_registration("baton-launch 1 1 3 n1 - 7000")); // the old protocol
  // rank 0 registers no one; a bad node name; a port out of range
  EXPECT_TRUE(check_registration(*parse_registration("baton-launch 2 - 0 3 n0 - 7000 -"), 3));
  EXPECT_TRUE(check_registration(*parse_registration("baton-launch 2 - 1 3 bad/name - 7000 -"),
                                 3));
  EXPECT_TRUE(check_registration(*parse_registration("baton-launch 2 - 1 3 n1 - 99999 -"), 3));
}

// Rank 0 learns every rank's node (a host left out is the address it
// connected from), each rank gets the exit code.
TEST(rendezvous, rank_0_gathers_the_nodes_and_sends_the_exit_code) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto second = std::async(std::launch::async, [&, port = port] {
    auto guest = joined(port, {2, "n2", "", 7002}, 3, stop);
    return guest ? guest->wait(stop) : caf::expected<launch_end>{caf::error{}};
  });
  auto first = std::async(std::launch::async, [&, port = port] {
    auto guest = joined(port, {1, "n1", "127.0.0.7", 7001}, 3, stop);
    return guest ? guest->wait(stop) : caf::expected<launch_end>{caf::error{}};
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
  EXPECT_EQ(a->code, 3);
  EXPECT_EQ(b->code, 3);
  EXPECT_EQ(a->reason, "");
}

TEST(rendezvous, a_rank_that_leaves_is_seen_by_rank_0_and_rank_0_leaving_by_the_others) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  // Rank 0 speaks first (its challenge): the others join while it gathers.
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(3, 10s, stop);
  });
  auto leaving = joined(port, {1, "n1", "", 7001}, 3, stop);
  auto staying = joined(port, {2, "n2", "", 7002}, 3, stop);
  ASSERT_TRUE(gathering.get());
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

// Issue 32, item 9: the second of two registrations as rank 1 is refused
// and told why; the first keeps its place and the gathering goes on.
TEST(rendezvous, a_duplicate_rank_is_refused_and_the_first_keeps_its_place) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(3, 10s, stop);
  });
  auto one = joined(port, {1, "n1", "", 7001}, 3, stop);
  // The first has registered before the second connects.
  std::this_thread::sleep_for(300ms);
  auto two = joined(port, {1, "n1b", "", 7002}, 3, stop);
  auto refused = two->wait(stop);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), errc::bad_config);
  EXPECT_NE(context_of(refused.error()).find("rank 0 refused this rank: rank 1 is already "
                                             "registered (node 'n1'"),
            std::string::npos)
    << context_of(refused.error());
  auto three = joined(port, {2, "n2", "", 7003}, 3, stop);
  auto peers = gathering.get();
  ASSERT_TRUE(peers) << describe(peers.error());
  EXPECT_EQ((*peers)[0].name, "n1");
  EXPECT_EQ((*peers)[1].name, "n2");
}

// Issue 32, item 9: what is not a registration (an HTTP probe, bytes without
// a line end, a connection that says nothing) is ignored and closed, and
// rank 0 keeps listening for the ranks.
TEST(rendezvous, garbage_is_ignored_and_rank_0_keeps_listening) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(2, 20s, stop);
  });
  auto send_raw = [port = port](const std::string& bytes) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    return fd;
  };
  int http = send_raw("GET / HTTP/1.0\r\n\r\n");
  int long_line = send_raw(std::string(20000, 'x'));
  int old_protocol = send_raw("baton-launch 1 1 2 n1 - 7001\n");
  std::this_thread::sleep_for(500ms);
  auto one = joined(port, {1, "n1", "", 7001}, 2, stop);
  auto peers = gathering.get();
  ASSERT_TRUE(peers) << describe(peers.error());
  EXPECT_EQ((*peers)[0].name, "n1");
  for (int fd : {http, long_line, old_protocol})
    ::close(fd);
}

// Issue 32, item 9: a rank of another job (two jobs on one port) is refused
// and told why; the job's own rank is gathered.
TEST(rendezvous, a_rank_of_another_job_is_refused) {
  rendezvous_rules job_a;
  job_a.job_id = "job-a";
  auto listening = rendezvous_host::listen(0, true, job_a);
  ASSERT_TRUE(listening) << describe(listening.error());
  auto& host = *listening;
  auto port = host->port();
  std::atomic<bool> stop{false};
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(2, 20s, stop);
  });
  rendezvous_rules job_b;
  job_b.job_id = "job-b";
  auto stranger = rendezvous_guest::join("127.0.0.1", port, {1, "b1", "", 7001}, 2, 10s, stop,
                                         job_b);
  ASSERT_TRUE(stranger) << describe(stranger.error());
  auto refused = (*stranger)->wait(stop);
  ASSERT_FALSE(refused);
  EXPECT_NE(context_of(refused.error()).find("rank 1 of job job-b, but this rank 0 runs job "
                                             "job-a"),
            std::string::npos)
    << context_of(refused.error());
  auto own = rendezvous_guest::join("127.0.0.1", port, {1, "a1", "", 7002}, 2, 10s, stop, job_a);
  ASSERT_TRUE(own) << describe(own.error());
  auto peers = gathering.get();
  ASSERT_TRUE(peers) << describe(peers.error());
  EXPECT_EQ((*peers)[0].name, "a1");
}

// Issue 32, item 9: with certificates, a rank proves that it holds the
// certificate of the node it registers: one without a proof, with another
// node's certificate or with a certificate of another CA is refused.
TEST(rendezvous, with_tls_a_rank_proves_its_certificate) {
  scratch_dir dir{"rendezvous-tls"};
  const auto certs = dir.path() + "/certs", other = dir.path() + "/other";
  ASSERT_TRUE(init_cluster_ca(certs));
  ASSERT_TRUE(init_cluster_ca(other));
  for (const auto* name : {"n0", "n1", "n2"})
    ASSERT_TRUE(issue_certificate(name, certs));
  ASSERT_TRUE(issue_certificate("n1", other));
  auto rules_of = [](const std::string& dir, const std::string& name) {
    rendezvous_rules r;
    r.job_id = "j";
    r.certificate = dir + "/" + name + ".pem";
    r.key = dir + "/" + name + ".key";
    r.ca = dir + "/ca.pem";
    return r;
  };
  auto listening = rendezvous_host::listen(0, true, rules_of(certs, "n0"));
  ASSERT_TRUE(listening) << describe(listening.error());
  auto& host = *listening;
  auto port = host->port();
  std::atomic<bool> stop{false};
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(3, 30s, stop);
  });
  auto refusal = [&](const launch_peer& self, const rendezvous_rules& rules) {
    auto guest = rendezvous_guest::join("127.0.0.1", port, self, 3, 10s, stop, rules);
    EXPECT_TRUE(guest) << describe(guest.error());
    if (!guest)
      return std::string{};
    auto end = (*guest)->wait(stop);
    EXPECT_FALSE(end);
    return end ? std::string{} : context_of(end.error());
  };
  rendezvous_rules no_proof;
  no_proof.job_id = "j";
  EXPECT_NE(refusal({1, "n1", "", 7001}, no_proof).find("did not prove its identity: no "
                                                        "certificate"),
            std::string::npos);
  EXPECT_NE(refusal({1, "n1", "", 7001}, rules_of(certs, "n2")).find("issued to 'n2', not to "
                                                                     "its node 'n1'"),
            std::string::npos);
  EXPECT_NE(refusal({1, "n1", "", 7001}, rules_of(other, "n1")).find("not the cluster CA's"),
            std::string::npos);
  auto one = joined(port, {1, "n1", "", 7001}, 3, stop);
  auto guest = rendezvous_guest::join("127.0.0.1", port, {2, "n2", "", 7002}, 3, 10s, stop,
                                      rules_of(certs, "n2"));
  // n1 above registered without a proof through joined(): refused; again with one.
  auto n1 = rendezvous_guest::join("127.0.0.1", port, {1, "n1", "", 7001}, 3, 10s, stop,
                                   rules_of(certs, "n1"));
  ASSERT_TRUE(n1) << describe(n1.error());
  auto peers = gathering.get();
  ASSERT_TRUE(peers) << describe(peers.error());
  EXPECT_EQ((*peers)[0].name, "n1");
  EXPECT_EQ((*peers)[1].name, "n2");
  auto unproven = one->wait(stop);
  ASSERT_FALSE(unproven);
  EXPECT_EQ(unproven.error(), errc::bad_config);
}

// Issue 32, item 9: when rank 0 gives up (here: a rank never came), the
// ranks that registered are told why and end with its exit code at once.
TEST(rendezvous, the_registered_ranks_learn_why_rank_0_gave_up) {
  auto [host, port] = any_host();
  ASSERT_TRUE(host);
  std::atomic<bool> stop{false};
  auto gathering = std::async(std::launch::async, [&, h = host.get()] {
    return h->gather(3, 2s, stop);
  });
  auto one = joined(port, {1, "n1", "", 7001}, 3, stop);
  auto peers = gathering.get();
  ASSERT_FALSE(peers);
  host->finish(1, "rank 0 gave up: " + context_of(peers.error()));
  auto end = one->wait(stop);
  ASSERT_TRUE(end) << describe(end.error());
  EXPECT_EQ(end->code, 1);
  EXPECT_NE(end->reason.find("rank 0 gave up: 1 of 2 ranks did not register within 2 s"),
            std::string::npos)
    << end->reason;
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

// frame_guard: the BASP frame-length check, fed bytes as a socket delivers
// them (whole frames, split headers, several frames per read).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/net/frame_guard.hpp"

using baton::actors::basp_header_bytes;
using baton::actors::frame_guard;
using baton::actors::frame_limits;
using baton::actors::handshake_budget;

namespace {

constexpr uint8_t server_handshake = 0x00;
constexpr uint8_t client_handshake = 0x01;
constexpr uint8_t direct_message = 0x02;
constexpr uint8_t heartbeat = 0x06;

/// A BASP header (big-endian payload length at bytes 4..7) and `payload`
/// bytes after it.
std::string frame(uint8_t operation, uint32_t length, size_t payload = 0) {
  std::string bytes(basp_header_bytes + payload, 'x');
  std::fill(bytes.begin(), bytes.begin() + basp_header_bytes, '\0');
  bytes[0] = static_cast<char>(operation);
  for (int i = 0; i < 4; ++i)
    bytes[4 + i] = static_cast<char>(length >> (24 - 8 * i));
  return bytes;
}

std::string frame_with_payload(uint8_t operation, uint32_t length) {
  return frame(operation, length, length);
}

frame_limits small_limits() {
  frame_limits limits;
  limits.handshake_bytes = 100;
  limits.frame_bytes = 1000;
  return limits;
}

bool feed(frame_guard& guard, const std::string& bytes) {
  return guard.feed(bytes.data(), bytes.size());
}

} // namespace

TEST(frame_guard, accepts_a_handshake_then_frames_up_to_the_limit) {
  frame_guard guard{small_limits(), nullptr};
  EXPECT_TRUE(feed(guard, frame_with_payload(server_handshake, 58)));
  EXPECT_TRUE(guard.handshake_done());
  EXPECT_TRUE(feed(guard, frame(heartbeat, 0)));
  EXPECT_TRUE(feed(guard, frame_with_payload(direct_message, 1000)));
  EXPECT_EQ(guard.frames(), 3u);
  EXPECT_FALSE(guard.refused());
}

TEST(frame_guard, refuses_a_frame_over_the_limit_at_its_header) {
  frame_guard guard{small_limits(), nullptr};
  ASSERT_TRUE(feed(guard, frame_with_payload(client_handshake, 40)));
  EXPECT_FALSE(feed(guard, frame(direct_message, 1001)));
  EXPECT_TRUE(guard.refused());
  EXPECT_EQ(guard.refused_length(), 1001u);
  EXPECT_NE(guard.reason().find("1001"), std::string::npos) << guard.reason();
  // Refused for good: nothing after it is looked at.
  EXPECT_FALSE(feed(guard, frame(heartbeat, 0)));
}

TEST(frame_guard, refuses_the_attack_header_with_the_default_limits) {
  handshake_budget budget{1 << 20};
  frame_guard before_handshake{frame_limits{}, &budget};
  EXPECT_FALSE(feed(before_handshake, frame(direct_message, 0xFFFFFFFF)));
  frame_guard as_handshake{frame_limits{}, &budget};
  EXPECT_FALSE(feed(as_handshake, frame(server_handshake, 0xFFFFFFFF)));
  EXPECT_EQ(as_handshake.refused_length(), 0xFFFFFFFFu);
  frame_guard after_handshake{frame_limits{}, &budget};
  ASSERT_TRUE(feed(after_handshake, frame_with_payload(server_handshake, 58)));
  EXPECT_TRUE(feed(after_handshake, frame(direct_message, baton::actors::max_frame_payload)));
  frame_guard over{frame_limits{}, &budget};
  ASSERT_TRUE(feed(over, frame_with_payload(server_handshake, 58)));
  EXPECT_FALSE(feed(over, frame(direct_message, baton::actors::max_frame_payload + 1)));
}

TEST(frame_guard, the_first_frame_must_be_a_small_handshake) {
  frame_guard not_handshake{small_limits(), nullptr};
  EXPECT_FALSE(feed(not_handshake, frame(direct_message, 10)));
  EXPECT_NE(not_handshake.reason().find("not a BASP handshake"), std::string::npos);
  frame_guard large_handshake{small_limits(), nullptr};
  EXPECT_FALSE(feed(large_handshake, frame(server_handshake, 101)));
  EXPECT_NE(large_handshake.reason().find("handshake"), std::string::npos);
}

TEST(frame_guard, headers_split_across_reads_are_checked_when_complete) {
  frame_guard guard{small_limits(), nullptr};
  ASSERT_TRUE(feed(guard, frame_with_payload(server_handshake, 10)));
  auto bad = frame(direct_message, 5000);
  // Every byte but the last of the header is fine to hand on.
  for (size_t i = 0; i + 1 < bad.size(); ++i)
    ASSERT_TRUE(guard.feed(&bad[i], 1)) << "byte " << i;
  EXPECT_FALSE(guard.feed(&bad.back(), 1));
}

TEST(frame_guard, several_frames_in_one_read_and_payloads_in_pieces) {
  frame_guard guard{small_limits(), nullptr};
  auto stream = frame_with_payload(client_handshake, 20) + frame(heartbeat, 0) +
                frame_with_payload(direct_message, 300) + frame(heartbeat, 0);
  ASSERT_TRUE(feed(guard, stream.substr(0, 70)));
  ASSERT_TRUE(feed(guard, stream.substr(70, 200)));
  ASSERT_TRUE(feed(guard, stream.substr(270)));
  EXPECT_EQ(guard.frames(), 4u);
  // A refused header after good frames in the same read.
  EXPECT_FALSE(feed(guard, frame(heartbeat, 0) + frame(direct_message, 2000)));
  EXPECT_EQ(guard.frames(), 5u);
}

TEST(frame_guard, handshakes_in_progress_share_a_budget) {
  handshake_budget budget{250};
  frame_guard first{small_limits(), &budget};
  frame_guard second{small_limits(), &budget};
  frame_guard third{small_limits(), &budget};
  // Headers announce 100 bytes each; their payloads have not arrived.
  ASSERT_TRUE(feed(first, frame(server_handshake, 100)));
  ASSERT_TRUE(feed(second, frame(server_handshake, 100)));
  EXPECT_EQ(budget.available(), 50u);
  EXPECT_FALSE(feed(third, frame(server_handshake, 100)));
  EXPECT_NE(third.reason().find("budget"), std::string::npos) << third.reason();
  // A completed handshake gives its share back, so does a closed connection.
  ASSERT_TRUE(feed(first, std::string(100, 'p')));
  EXPECT_TRUE(first.handshake_done());
  EXPECT_EQ(budget.available(), 150u);
  {
    frame_guard closed{small_limits(), &budget};
    ASSERT_TRUE(feed(closed, frame(server_handshake, 100)));
    EXPECT_EQ(budget.available(), 50u);
  }
  EXPECT_EQ(budget.available(), 150u);
  frame_guard fourth{small_limits(), &budget};
  EXPECT_TRUE(feed(fourth, frame(server_handshake, 100)));
}

TEST(frame_guard, an_empty_handshake_completes_at_its_header) {
  handshake_budget budget{10};
  frame_guard guard{small_limits(), &budget};
  ASSERT_TRUE(feed(guard, frame(client_handshake, 0)));
  EXPECT_TRUE(guard.handshake_done());
  EXPECT_EQ(budget.available(), 10u);
}

// -- the frame budget (issue 21, item 10) ----------------------------------------

using baton::actors::frame_budget;

TEST(frame_guard, large_frames_after_the_handshake_wait_for_the_shared_budget) {
  frame_budget budget{200 << 10};
  frame_guard first{frame_limits{}, nullptr, &budget};
  frame_guard second{frame_limits{}, nullptr, &budget};
  int woken = 0;
  second.on_wake([&] { ++woken; });
  ASSERT_TRUE(feed(first, frame_with_payload(client_handshake, 40)));
  ASSERT_TRUE(feed(second, frame_with_payload(client_handshake, 40)));
  // 150 KiB fit; a second 150 KiB frame waits at its header.
  ASSERT_TRUE(feed(first, frame(direct_message, 150 << 10)));
  EXPECT_EQ(budget.available(), 50u << 10);
  EXPECT_TRUE(feed(second, frame(direct_message, 150 << 10)));
  EXPECT_TRUE(second.waiting());
  EXPECT_EQ(second.headers(), 1u) << "the handshake's only: the waiting header is held";
  EXPECT_EQ(second.header_missing(), 0u);
  EXPECT_EQ(budget.waiting(), 1u);
  EXPECT_FALSE(second.retry()) << "still no room";
  // The first frame's payload arrives: its bytes go back, the waiter is woken.
  ASSERT_TRUE(feed(first, std::string(150 << 10, 'p')));
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(budget.available(), 200u << 10);
  ASSERT_TRUE(second.retry());
  EXPECT_FALSE(second.waiting());
  EXPECT_EQ(second.headers(), 2u);
  EXPECT_EQ(budget.available(), 50u << 10);
  ASSERT_TRUE(feed(second, std::string(150 << 10, 'p')));
  EXPECT_EQ(second.frames(), 2u);
  EXPECT_EQ(budget.available(), 200u << 10);
}

TEST(frame_guard, small_frames_pass_a_budget_held_by_others) {
  frame_budget budget{100 << 10};
  frame_guard holder{frame_limits{}, nullptr, &budget};
  ASSERT_TRUE(feed(holder, frame_with_payload(client_handshake, 40)));
  ASSERT_TRUE(feed(holder, frame(direct_message, 100 << 10)));
  EXPECT_EQ(budget.available(), 0u);
  frame_guard control{frame_limits{}, nullptr, &budget};
  ASSERT_TRUE(feed(control, frame_with_payload(client_handshake, 40)));
  EXPECT_TRUE(feed(control, frame_with_payload(direct_message, 64 << 10)));
  EXPECT_TRUE(feed(control, frame(heartbeat, 0)));
  EXPECT_FALSE(control.waiting());
  EXPECT_EQ(control.frames(), 3u);
}

TEST(frame_guard, a_closed_connection_gives_back_its_share_and_its_wait) {
  frame_budget budget{100 << 10};
  {
    frame_guard holder{frame_limits{}, nullptr, &budget};
    ASSERT_TRUE(feed(holder, frame_with_payload(client_handshake, 40)));
    ASSERT_TRUE(feed(holder, frame(direct_message, 80 << 10)));
    frame_guard waiter{frame_limits{}, nullptr, &budget};
    ASSERT_TRUE(feed(waiter, frame_with_payload(client_handshake, 40)));
    ASSERT_TRUE(feed(waiter, frame(direct_message, 80 << 10)));
    EXPECT_TRUE(waiter.waiting());
    // Bytes while waiting: the transport stops reading, so this is refused.
    frame_guard eager{frame_limits{}, nullptr, &budget};
    ASSERT_TRUE(feed(eager, frame_with_payload(client_handshake, 40)));
    EXPECT_FALSE(feed(eager, frame(direct_message, 80 << 10) + "p"));
    EXPECT_NE(eager.reason().find("waits for the frame budget"), std::string::npos)
      << eager.reason();
    EXPECT_EQ(budget.waiting(), 2u);
  }
  EXPECT_EQ(budget.available(), 100u << 10);
  EXPECT_EQ(budget.waiting(), 0u);
}

// Issue 32, item 14: frames up to 64 KiB used to pass uncounted, so that
// thousands of handshaken peers each announcing 64 KiB added up without a
// bound. They now count against a small-frame budget of their own: small
// frames still pass while large ones hold the frame budget, but not beyond it.
TEST(frame_guard, small_frames_count_against_a_budget_of_their_own) {
  frame_budget large{100 << 10};
  frame_budget small{128 << 10};
  frame_guard holder{frame_limits{}, nullptr, &large, &small};
  ASSERT_TRUE(feed(holder, frame_with_payload(client_handshake, 40)));
  ASSERT_TRUE(feed(holder, frame(direct_message, 100 << 10)));
  EXPECT_EQ(large.available(), 0u);
  EXPECT_EQ(small.available(), 128u << 10) << "a handshake is the handshake budget's";
  frame_guard first{frame_limits{}, nullptr, &large, &small};
  frame_guard second{frame_limits{}, nullptr, &large, &small};
  frame_guard third{frame_limits{}, nullptr, &large, &small};
  int woken = 0;
  third.on_wake([&] { ++woken; });
  for (auto* g : {&first, &second, &third}) {
    ASSERT_TRUE(feed(*g, frame_with_payload(client_handshake, 40)));
    ASSERT_TRUE(feed(*g, frame(direct_message, 64 << 10)));
  }
  EXPECT_FALSE(first.waiting()) << "small frames pass a frame budget held by a large one";
  EXPECT_FALSE(second.waiting());
  EXPECT_TRUE(third.waiting()) << "the third 64 KiB frame does not fit in 128 KiB";
  EXPECT_EQ(third.current_budget(), &small);
  EXPECT_EQ(small.available(), 0u);
  ASSERT_TRUE(feed(first, std::string(64 << 10, 'p')));
  EXPECT_EQ(woken, 1);
  ASSERT_TRUE(third.retry());
  ASSERT_TRUE(feed(third, std::string(64 << 10, 'p')));
  EXPECT_EQ(third.frames(), 2u);
  EXPECT_EQ(small.available(), 64u << 10) << "the second still holds its share";
}

TEST(frame_guard, the_default_guard_counts_small_frames_in_the_process_budget) {
  auto& small = frame_budget::small_frames_process_wide();
  const auto before = small.available();
  frame_guard guard;
  ASSERT_TRUE(feed(guard, frame_with_payload(client_handshake, 40)));
  ASSERT_TRUE(feed(guard, frame(direct_message, 64 << 10)));
  EXPECT_EQ(small.available(), before - (64u << 10));
  EXPECT_EQ(guard.frame_reserved(), 64u << 10);
}

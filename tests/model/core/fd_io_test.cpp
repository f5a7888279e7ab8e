// Whole buffers through a descriptor (model/core/fd_io.hpp): across a socket
// pair, and to a socket whose peer went away, which is an error (EPIPE) the
// caller sees, not a SIGPIPE that ends the process (the suites' zygote and
// predict's link calibration write to sockets whose peer may be gone).

#include "model/core/fd_io.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

using baton::model::read_all;
using baton::model::write_all;

TEST(fd_io, a_buffer_crosses_a_socket_pair_and_a_pipe_whole) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const std::string sent(100000, 'x');
  ASSERT_TRUE(write_all(pair[0], sent.data(), 1000));
  std::string got(1000, '\0');
  ASSERT_TRUE(read_all(pair[1], got.data(), got.size()));
  EXPECT_EQ(got, sent.substr(0, 1000));
  ::close(pair[0]);
  ::close(pair[1]);
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0); // not a socket: written with write(2)
  ASSERT_TRUE(write_all(pipe_ends[1], sent.data(), 1000));
  ASSERT_TRUE(read_all(pipe_ends[0], got.data(), got.size()));
  EXPECT_EQ(got, sent.substr(0, 1000));
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

TEST(fd_io, a_socket_whose_peer_went_away_is_epipe_not_a_signal) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ::close(pair[1]);
  const char byte = 'x';
  errno = 0;
  EXPECT_FALSE(write_all(pair[0], &byte, 1)); // the process is still here
  EXPECT_EQ(errno, EPIPE);
  ::close(pair[0]);
}

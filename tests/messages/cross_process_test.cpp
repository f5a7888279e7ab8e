// Every message type of the type-ID block through a real second process: the
// test forks (before any actor system exists) a child that publishes an echo
// actor on 127.0.0.1 at a port chosen by the OS; the parent sends each message
// with a request and checks that what comes back equals what went out, tensors
// bit for bit. A message type missing from the block, or registered under
// another name, would come back as an unexpected message or not at all.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "messages/codec.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/message_testing.hpp"

using namespace std::chrono_literals;
using namespace baton;
using namespace baton::messages;
using namespace baton::messages::testing;

namespace {

constexpr auto request_timeout = 60s;

// -- the child: an echo node ----------------------------------------------------------

/// Replies with what it received. A message that arrived invalid goes back
/// invalid too (as a refusal on the wire), which shows what the child saw.
caf::behavior echo_actor(caf::event_based_actor*) {
  return {
    [](const microbatch& x) { return x; },
    [](const gradient& x) { return x; },
    [](const tensor_set& x) { return x; },
    [](const credit& x) { return x; },
    [](const control& x) { return x; },
    [](const actor_report& x) { return x; },
    [](const node_report& x) { return x; },
    [](const spawn_request& x) { return x; },
    [](const progress& x) { return x; },
  };
}

void configure(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
}

/// Runs in the child: serves until the parent writes to (or closes) `quit_in`.
[[noreturn]] void serve_echo(int port_out, int quit_in) {
  // Never outlive the test process, even if it is killed.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int status = 1;
  try {
    caf::actor_system_config cfg;
    configure(cfg);
    caf::actor_system sys{cfg};
    auto echo = sys.spawn(echo_actor);
    auto port = sys.middleman().publish(echo, 0, "127.0.0.1", true);
    uint16_t value = port ? *port : 0;
    if (::write(port_out, &value, sizeof(value)) != sizeof(value))
      value = 0;
    ::close(port_out);
    char byte;
    while (::read(quit_in, &byte, 1) < 0 && errno == EINTR) {
      // retry
    }
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
    status = value != 0 ? 0 : 2;
  } catch (...) {
    status = 3;
  }
  ::_exit(status);
}

/// The child process, owned by the parent: the destructor always stops and
/// reaps it (politely first, then with SIGKILL).
class echo_node {
public:
  /// Forks the child; call before this process creates any actor system.
  static std::unique_ptr<echo_node> start() {
    int port_pipe[2];
    int quit_pipe[2];
    if (::pipe2(port_pipe, O_CLOEXEC) != 0 || ::pipe2(quit_pipe, O_CLOEXEC) != 0)
      return nullptr;
    std::fflush(nullptr); // the child must not repeat buffered output
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(port_pipe[0]);
      ::close(quit_pipe[1]);
      serve_echo(port_pipe[1], quit_pipe[0]);
    }
    ::close(port_pipe[1]);
    ::close(quit_pipe[0]);
    std::unique_ptr<echo_node> node{new echo_node(pid, quit_pipe[1])};
    node->port_ = read_port(port_pipe[0]);
    ::close(port_pipe[0]);
    return node;
  }

  ~echo_node() {
    if (pid_ <= 0)
      return;
    ::close(quit_fd_);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
        return;
      std::this_thread::sleep_for(100ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  echo_node(const echo_node&) = delete;
  echo_node& operator=(const echo_node&) = delete;

  /// The port the echo actor listens on; 0 when the child failed to publish.
  uint16_t port() const {
    return port_;
  }

private:
  echo_node(pid_t pid, int quit_fd) : pid_(pid), quit_fd_(quit_fd) {
    // nop
  }

  static uint16_t read_port(int fd) {
    pollfd ready{fd, POLLIN, 0};
    uint16_t port = 0;
    if (::poll(&ready, 1, 30000) == 1 && ::read(fd, &port, sizeof(port)) == sizeof(port))
      return port;
    return 0;
  }

  pid_t pid_;
  int quit_fd_;
  uint16_t port_ = 0;
};

// -- a peer that sends forged bytes -----------------------------------------------------

/// Registered under the name of microbatch in a second actor system of the
/// parent: sends bytes chosen by the test where a microbatch is expected, as a
/// buggy or hostile peer would, and reads the reply as a real microbatch.
struct forged_microbatch {
  wire_bytes bytes;
  microbatch reply;
};

caf::error inspect(caf::serializer& f, forged_microbatch& x) {
  auto size = static_cast<uint32_t>(x.bytes.size());
  if (auto err = f(size))
    return err;
  return f.apply_raw(x.bytes.size(), x.bytes.data());
}

caf::error inspect(caf::deserializer& f, forged_microbatch& x) {
  return baton::messages::inspect(f, x.reply);
}

std::string to_string(const forged_microbatch& x) {
  return "forged_microbatch(" + std::to_string(x.bytes.size()) + " bytes)";
}

// -- the parent ----------------------------------------------------------------------

/// Sends `x` to `echo` and returns the reply (default T when there is none).
template <class T, class Reply = T>
Reply ask(caf::actor_system& sys, const caf::actor& echo, T x) {
  caf::scoped_actor self{sys};
  Reply result;
  bool replied = false;
  std::string failure = "no reply";
  self->request(echo, request_timeout, std::move(x))
    .receive(
      [&](Reply& y) {
        result = std::move(y);
        replied = true;
      },
             [&](caf::error& err) { failure = describe(err); });
  EXPECT_TRUE(replied) << failure;
  return result;
}

class cross_process : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    node_ = echo_node::start(); // fork first: no actor system exists yet
    if (node_ == nullptr || node_->port() == 0)
      return;
    config_ = std::make_unique<caf::actor_system_config>();
    configure(*config_);
    system_ = std::make_unique<caf::actor_system>(*config_);
    auto echo = system_->middleman().remote_actor("127.0.0.1", node_->port());
    if (echo)
      echo_ = *echo;
    else
      failure_ = describe(echo.error());
  }

  static void TearDownTestSuite() {
    echo_ = caf::actor{};
    system_.reset();
    config_.reset();
    node_.reset();
  }

  void SetUp() override {
    ASSERT_TRUE(node_ != nullptr && node_->port() != 0) << "the echo node did not start";
    ASSERT_TRUE(echo_) << "cannot reach the echo node: " << failure_;
  }

  template <class T>
  T echo(const T& x) {
    return ask(*system_, echo_, x);
  }

  template <class T>
  void round_trip_one() {
    SCOPED_TRACE(caf::type_name<T>::value);
    auto x = sample(tag<T>{});
    expect_same(x, echo(x));
  }

  template <caf::type_id_t... Offsets>
  void round_trip_each(std::integer_sequence<caf::type_id_t, Offsets...>) {
    constexpr auto first = caf::id_block::baton::begin;
    (round_trip_one<typename caf::type_by_id<static_cast<caf::type_id_t>(first + Offsets)>::type>(),
     ...);
  }

  static std::unique_ptr<echo_node> node_;
  static std::unique_ptr<caf::actor_system_config> config_;
  static std::unique_ptr<caf::actor_system> system_;
  static caf::actor echo_;
  static std::string failure_;
};

std::unique_ptr<echo_node> cross_process::node_;
std::unique_ptr<caf::actor_system_config> cross_process::config_;
std::unique_ptr<caf::actor_system> cross_process::system_;
caf::actor cross_process::echo_;
std::string cross_process::failure_;

} // namespace

TEST_F(cross_process, every_type_of_the_id_block_round_trips) {
  constexpr auto count = caf::id_block::baton::end - caf::id_block::baton::begin;
  static_assert(count == 9, "a new message type also needs a sample in message_testing.hpp");
  round_trip_each(std::make_integer_sequence<caf::type_id_t, count>{});
}

TEST_F(cross_process, microbatch_of_every_dtype_round_trips) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kByte, at::kInt, at::kChar,
                     at::kHalf, at::kBFloat16, at::kBool, at::kShort}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto x = sample(tag<microbatch>{}, dtype);
    expect_same(x, echo(x));
  }
}

TEST_F(cross_process, non_contiguous_and_empty_tensors_round_trip) {
  auto x = sample(tag<microbatch>{});
  x.payload = pattern({64, 48}, at::kDouble).t();
  x.labels.push_back({"empty", at::empty({0}, at::kLong)});
  expect_same(x, echo(x));
}

TEST_F(cross_process, tensor_of_exactly_the_limit_round_trips) {
  auto x = sample(tag<microbatch>{});
  x.payload = pattern({int64_t{16} << 20}, at::kFloat); // 64 MiB
  auto y = echo(x);
  EXPECT_FALSE(y.invalid) << describe(y.invalid);
  EXPECT_TRUE(bit_equal(x.payload, y.payload));
}

TEST_F(cross_process, oversized_tensor_arrives_invalid_instead_of_vanishing) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::zeros({int64_t{64 << 20} + 1}, at::kByte);
  auto y = echo(x);
  EXPECT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
}

TEST_F(cross_process, tensor_sets_of_many_tensors_round_trip) {
  auto x = sample(tag<tensor_set>{});
  x.kind = "weights";
  for (int i = 0; i < 40; ++i)
    x.tensors.push_back(pattern({int64_t{1} << (i % 16)}, i % 2 ? at::kFloat : at::kDouble));
  expect_same(x, echo(x));
  tensor_set empty;
  empty.kind = "gradients";
  expect_same(empty, echo(empty));
}

TEST_F(cross_process, tensor_set_with_an_oversized_tensor_arrives_invalid) {
  auto x = sample(tag<tensor_set>{});
  x.tensors.push_back(at::zeros({int64_t{64 << 20} + 1}, at::kByte));
  auto y = echo(x);
  EXPECT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("gradients[7]"), std::string::npos) << describe(y.invalid);
}

TEST_F(cross_process, actor_report_with_a_trace_round_trips) {
  auto x = sample(tag<actor_report>{});
  for (int64_t i = 0; i < 20000; ++i)
    x.trace.push_back({i % 2 ? "backward" : "forward", 1718000000000000 + 50 * i, 40, i, i / 4});
  expect_same(x, echo(x));
}

TEST_F(cross_process, invalid_message_stays_invalid) {
  auto x = sample(tag<gradient>{});
  x.invalid = make_error(errc::unknown_dtype, "gradient: dtype code 42 is unknown");
  auto y = echo(x);
  EXPECT_TRUE(is(y.invalid, errc::unknown_dtype)) << describe(y.invalid);
}

TEST_F(cross_process, tampered_tensor_bytes_arrive_invalid) {
  // A second actor system plays a peer whose microbatch has a tensor whose
  // shape does not match its bytes.
  wire_patcher patcher;
  auto bytes = encode(sample(tag<microbatch>{}));
  ASSERT_TRUE(bytes);
  auto forged = forged_microbatch{patcher.patch(*bytes, [](auto envelope) {
    auto payload = wire_patcher::body(envelope, "microbatch").get("payload");
    payload.template as<capnp::DynamicStruct>()
      .get("shape")
      .template as<capnp::DynamicList>()
      .set(0, 5);
  }), {}};
  caf::actor_system_config cfg;
  cfg.add_message_type<forged_microbatch>(caf::type_name<microbatch>::value);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system peer{cfg};
  auto peer_echo = peer.middleman().remote_actor("127.0.0.1", node_->port());
  ASSERT_TRUE(peer_echo) << describe(peer_echo.error());
  auto reply = ask(peer, *peer_echo, forged).reply;
  // The child neither crashed nor dropped it: it saw the message as invalid.
  EXPECT_TRUE(is(reply.invalid, errc::shape_mismatch)) << describe(reply.invalid);
  EXPECT_NE(describe(reply.invalid).find("needs 15680 bytes, the data has 12544"),
            std::string::npos)
    << describe(reply.invalid);
  // And it still serves well-formed messages afterwards.
  auto x = sample(tag<credit>{});
  expect_same(x, echo(x));
}

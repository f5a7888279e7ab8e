#include "actors/net/framed_transport.hpp"

#include <cstring>
#include <memory>
#include <mutex>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/interfaces.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/policy/tcp.hpp>
#include <spdlog/spdlog.h>

#include "actors/net/frame_guard.hpp"
#include "messages/crossing_cpu.hpp"

namespace baton::actors {
inline namespace net {

namespace {

namespace net = caf::io::network;

/// Where the framed middleman actor of a system is registered.
constexpr auto registry_name = caf::atom("BatonFrame");

constexpr auto request_timeout = std::chrono::seconds(30);

std::string peer_of(net::native_socket fd) {
  auto address = net::remote_addr_of_fd(fd);
  auto port = net::remote_port_of_fd(fd);
  return (address ? *address : std::string{"?"}) + ":" + (port ? std::to_string(*port) : "?");
}

class framed_scribe;

/// The read buffer a connection keeps between frames: a header's and the
/// small messages' (credits, heartbeats, reports).
constexpr size_t kept_read_buffer_bytes = 4u << 10;

/// What the read policy of one connection and its scribe share. A wake-up
/// from the frame budget holds it weakly: it may outlive neither.
struct framed_connection {
  explicit framed_connection(std::string address) : peer(std::move(address)) {}

  std::string peer;                ///< "address:port", for the log
  frame_guard guard;               ///< the process's limits and budgets
  bool deliver_header = false;     ///< a waiting header got its bytes: CAF reads it next
  bool wait_logged = false;        ///< the connection's first wait was logged
  framed_scribe* scribe = nullptr; ///< null once the scribe is gone
};

/// caf::policy::tcp, with every byte read shown to a frame_guard first. CAF
/// asks for exactly a header, then exactly its payload, and resizes its
/// buffer in between: a header is held here until the guard lets it
/// through, so that neither a refused header nor one waiting for the frame
/// budget makes CAF allocate.
class framed_policy {
public:
  explicit framed_policy(std::shared_ptr<framed_connection> connection)
      : connection_(std::move(connection)) {}

  net::rw_state read_some(size_t& result, net::native_socket fd, void* buf, size_t len);

  net::rw_state write_some(size_t& result, net::native_socket fd, const void* buf, size_t len) {
    messages::crossing_scope writing{messages::crossing_part::wire};
    return caf::policy::tcp::write_some(result, fd, buf, len);
  }

  bool try_accept(net::native_socket& result, net::native_socket fd) {
    return caf::policy::tcp::try_accept(result, fd);
  }

  bool must_read_more(net::native_socket, size_t) { return false; }

private:
  net::rw_state read_header(size_t& result, net::native_socket fd, void* buf, size_t len);
  net::rw_state deliver_header(size_t& result, void* buf, size_t len);
  net::rw_state refuse(size_t& result);
  net::rw_state wait(size_t& result);

  std::shared_ptr<framed_connection> connection_;
};

/// caf::io::network::scribe_impl over the framed policy (the same members;
/// CAF's class fixes its policy to plain TCP), which stops reading while its
/// connection waits for the frame budget.
class framed_scribe : public caf::io::scribe {
public:
  framed_scribe(net::default_multiplexer& mpx, net::native_socket fd)
      : scribe(net::conn_hdl_from_socket(fd)),
        connection_(std::make_shared<framed_connection>(peer_of(fd))),
        stream_(mpx, fd, connection_) {
    connection_->scribe = this;
    // From the thread that releases budget: the retry runs on the
    // multiplexer's, which owns this scribe; a connection gone by then is
    // skipped.
    std::weak_ptr<framed_connection> weak = connection_;
    connection_->guard.on_wake([weak, mpx = &mpx] {
      mpx->post([weak] {
        if (auto connection = weak.lock(); connection && connection->scribe)
          connection->scribe->resume_reading();
      });
    });
  }

  ~framed_scribe() override { connection_->scribe = nullptr; }

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }

  /// CAF keeps a connection's read buffer at the size of the largest frame
  /// it has read (it resizes, never shrinks), outside any budget: one over a
  /// few KiB is given back once BASP has taken the frame (else every idle
  /// peer that once sent a 64 KiB frame would keep 64 KiB of the node).
  bool consume(caf::execution_unit* ctx, const void* buf, size_t size) override {
    bool result = scribe::consume(ctx, buf, size);
    if (stream_.rd_buf().capacity() > kept_read_buffer_bytes)
      std::vector<char>{}.swap(stream_.rd_buf());
    return result;
  }

  /// Reading again once the waiting frame has its share of the budget.
  void resume_reading() {
    if (detached() || !connection_->guard.waiting() || !connection_->guard.retry())
      return;
    connection_->deliver_header = true;
    stream_.activate(this);
  }

  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override { stream_.flush(this); }

  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  std::shared_ptr<framed_connection> connection_;
  net::stream_impl<framed_policy> stream_;
};

net::rw_state framed_policy::read_some(size_t& result, net::native_socket fd, void* buf,
                                       size_t len) {
  auto& guard = connection_->guard;
  if (connection_->deliver_header)
    return deliver_header(result, buf, len);
  if (guard.waiting())
    return wait(result); // reading was switched on again by someone else
  if (guard.header_missing() > 0)
    return read_header(result, fd, buf, len);
  auto state = [&] {
    messages::crossing_scope reading{messages::crossing_part::wire};
    return caf::policy::tcp::read_some(result, fd, buf, len);
  }();
  if (state != net::rw_state::success || result == 0 || guard.feed(buf, result))
    return state;
  return refuse(result);
}

/// Reads at most the rest of the current header into the guard; CAF gets
/// the header once it is complete and let through.
net::rw_state framed_policy::read_header(size_t& result, net::native_socket fd, void* buf,
                                         size_t len) {
  auto& guard = connection_->guard;
  unsigned char bytes[basp_header_bytes];
  auto state = [&] {
    messages::crossing_scope reading{messages::crossing_part::wire};
    return caf::policy::tcp::read_some(result, fd, bytes, guard.header_missing());
  }();
  if (state != net::rw_state::success || result == 0)
    return state;
  auto headers = guard.headers();
  if (!guard.feed(bytes, result))
    return refuse(result);
  if (guard.waiting())
    return wait(result);
  result = 0; // CAF reads nothing until the whole header is here
  return guard.headers() == headers ? state : deliver_header(result, buf, len);
}

net::rw_state framed_policy::deliver_header(size_t& result, void* buf, size_t len) {
  connection_->deliver_header = false;
  if (len < basp_header_bytes) { // CAF reads BASP headers whole: not seen
    spdlog::error("BASP connection from {}: CAF asked for {} bytes of a {}-byte header; closing it",
                  connection_->peer, len, basp_header_bytes);
    result = 0;
    return net::rw_state::failure;
  }
  std::memcpy(buf, connection_->guard.header(), basp_header_bytes);
  result = basp_header_bytes;
  return net::rw_state::success;
}

net::rw_state framed_policy::refuse(size_t& result) {
  // CAF reports the failure to the BASP broker, which closes the connection.
  spdlog::error("refused a BASP connection from {}: {} (frames are limited to {} bytes, "
                "handshakes to {}); closing it",
                connection_->peer, connection_->guard.reason(), max_frame_payload,
                max_handshake_payload);
  result = 0;
  return net::rw_state::failure;
}

/// Stops reading the connection until the frame budget has room for its
/// frame (framed_scribe::resume_reading): its bytes stay in the socket, and
/// TCP slows the sender down.
net::rw_state framed_policy::wait(size_t& result) {
  const frame_budget* budget = connection_->guard.current_budget();
  if (!connection_->wait_logged && budget != nullptr) {
    connection_->wait_logged = true;
    const bool small = budget == &frame_budget::small_frames_process_wide();
    spdlog::warn("BASP connection from {} waits: its frame of {} bytes does not fit in the {} "
                 "bytes that {}frames in flight on all connections may hold ({} free); reading "
                 "it resumes when other frames have arrived",
                 connection_->peer, frame_payload_length(connection_->guard.header()),
                 budget->capacity(), small ? "small " : "", budget->available());
  }
  if (connection_->scribe != nullptr)
    connection_->scribe->remove_from_loop();
  result = 0;
  return net::rw_state::success;
}

/// CAF's doorman, handing accepted sockets to framed scribes.
class framed_doorman : public net::doorman_impl {
public:
  using net::doorman_impl::doorman_impl;

  bool new_connection() override {
    // Already detached from the broker while the multiplexer still held an
    // event for the socket (as in CAF's doorman_impl).
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    net::keepalive(fd, true);
    auto scribe = caf::make_counted<framed_scribe>(mpx, fd);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
};

/// The middleman actor of caf_openssl's pattern: CAF's implementation, with
/// its connections and ports made by the framed classes above.
class framed_middleman_actor : public caf::io::middleman_actor_impl {
public:
  framed_middleman_actor(caf::actor_config& cfg, caf::actor broker)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)) {}

  const char* name() const override { return "baton.framed_middleman_actor"; }

  void on_exit() override {
    // The system's destructor waits until this detached actor is destroyed,
    // before the registry would drop its reference.
    system().registry().erase(registry_name);
    caf::io::middleman_actor_impl::on_exit();
  }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = net::new_tcp_connection(host, port);
    if (!fd)
      return std::move(fd.error());
    net::keepalive(*fd, true);
    return caf::make_counted<framed_scribe>(multiplexer(), *fd);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* address,
                                           bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, address, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<framed_doorman>(multiplexer(), *fd);
  }

private:
  net::default_multiplexer& multiplexer() {
    return static_cast<net::default_multiplexer&>(system().middleman().backend());
  }
};

/// The framed middleman actor of `sys`, spawned on first use.
caf::io::middleman_actor framed_middleman(caf::actor_system& sys) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock{mutex};
  if (auto existing = sys.registry().get(registry_name))
    return caf::actor_cast<caf::io::middleman_actor>(existing);
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached as CAF's own middleman actor: connecting blocks its thread.
  auto framed = sys.spawn<framed_middleman_actor, caf::detached + caf::hidden>(broker);
  // A detached actor must be gone before the system's destructor waits for
  // detached threads: it ends with the broker, which the middleman stops.
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(framed);
  caf::actor_cast<caf::abstract_actor*>(broker)->attach_functor([weak] {
    if (auto strong = weak.lock())
      caf::anon_send_exit(caf::actor_cast<caf::actor>(strong), caf::exit_reason::kill);
  });
  sys.registry().put(registry_name, caf::actor_cast<caf::strong_actor_ptr>(framed));
  return framed;
}

} // namespace

void install_framed_transport(caf::actor_system& sys) {
  framed_middleman(sys);
}

caf::expected<uint16_t> publish_framed(caf::actor_system& sys, const caf::actor& whom,
                                       uint16_t port, const std::string& host) {
  install_framed_transport(sys);
  auto framed = framed_middleman(sys);
  caf::scoped_actor self{sys, true};
  caf::expected<uint16_t> result = caf::sec::cannot_open_port;
  self->request(framed, request_timeout, caf::publish_atom::value, port,
                caf::actor_cast<caf::strong_actor_ptr>(whom), std::set<std::string>{}, host, true)
    .receive([&](uint16_t actual) { result = actual; },
             [&](caf::error& err) { result = std::move(err); });
  return result;
}

caf::expected<caf::actor> remote_actor_framed(caf::actor_system& sys, const std::string& host,
                                              uint16_t port) {
  install_framed_transport(sys);
  auto framed = framed_middleman(sys);
  caf::scoped_actor self{sys, true};
  caf::expected<caf::actor> result = caf::sec::cannot_connect_to_node;
  self->request(framed, caf::infinite, caf::connect_atom::value, host, port)
    .receive(
      [&](caf::node_id&, caf::strong_actor_ptr& actor, std::set<std::string>& interface) {
        if (!actor)
          result = caf::sec::no_actor_published_at_port;
        else if (!interface.empty()) // a typed actor: baton publishes dynamically typed ones
          result = caf::sec::unexpected_actor_messaging_interface;
        else
          result = caf::actor_cast<caf::actor>(std::move(actor));
      },
      [&](caf::error& err) { result = std::move(err); });
  return result;
}

} // namespace net
} // namespace baton::actors

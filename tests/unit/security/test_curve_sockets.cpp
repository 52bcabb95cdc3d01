// CURVE and ZAP on real ZeroMQ sockets over loopback: a client with a listed key gets
// through (and the ZAP handler names it), one with an unlisted key or without CURVE
// never does, and each refusal reaches `on_refused` with the key and address.

#include <atomic>
#include <mutex>

#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "prfaas/runtime/security.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;

namespace {

struct refusals {
  std::mutex mtx;
  std::vector<prfaas::auth_refusal> seen;

  size_t size() {
    std::lock_guard<std::mutex> g{mtx};
    return seen.size();
  }
};

/// Two nodes, "srv" and "cli", that know each other's keys.
struct pair_of_nodes {
  prfaas::curve_keypair srv_keys = prfaas::generate_curve_keypair();
  prfaas::curve_keypair cli_keys = prfaas::generate_curve_keypair();
  std::shared_ptr<refusals> refused = std::make_shared<refusals>();

  prfaas::security_ptr security(const std::string& self, const prfaas::curve_keypair& own) const {
    auto s = std::make_shared<prfaas::node_security>();
    s->node = self;
    s->keys = own;
    s->peer_keys = {{"srv", srv_keys.public_key}, {"cli", cli_keys.public_key}};
    s->allowed = {{srv_keys.public_key, "srv"}, {cli_keys.public_key, "cli"}};
    s->on_refused = [r = refused](const prfaas::auth_refusal& x) {
      std::lock_guard<std::mutex> g{r->mtx};
      r->seen.push_back(x);
    };
    return s;
  }
};

/// The next message on `router` as (routing id, body, ZAP user id); empty after 5 s.
std::optional<std::array<std::string, 3>> receive(zmq::socket_t& router) {
  zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, 5s) == 0)
    return std::nullopt;
  zmq::message_t id, body;
  (void)router.recv(id);
  (void)router.recv(body);
  const char* user = body.gets("User-Id");
  return std::array<std::string, 3>{id.to_string(), body.to_string(), user ? user : ""};
}

zmq::socket_t dealer(zmq::context_t& ctx, const std::string& id) {
  zmq::socket_t s{ctx, zmq::socket_type::dealer};
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::routing_id, id);
  return s;
}

} // namespace

TEST_CASE("a CURVE server admits listed keys only and reports every refusal") {
  pair_of_nodes keys;
  zmq::context_t ctx{1};
  auto srv_sec = keys.security("srv", keys.srv_keys);
  zmq::socket_t router{ctx, zmq::socket_type::router};
  router.set(zmq::sockopt::linger, 0);
  auto zap = prfaas::curve_server(ctx, router, srv_sec, "control");
  router.bind("tcp://127.0.0.1:*");
  const auto endpoint = router.get(zmq::sockopt::last_endpoint);

  auto good = dealer(ctx, "cli");
  prfaas::curve_client(good, *keys.security("cli", keys.cli_keys), "srv");
  good.connect(endpoint);
  good.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  auto first = receive(router);
  REQUIRE(first);
  CHECK((*first)[0] == "cli");
  CHECK((*first)[1] == "hello");
  CHECK((*first)[2] == "cli"); // the ZAP handler vouched for the key: it is node cli's
  CHECK(keys.refused->size() == 0);

  SECTION("an unlisted key is refused, logged with its key, and never delivers") {
    auto stranger_keys = prfaas::generate_curve_keypair();
    auto stranger = dealer(ctx, "cli"); // even under a listed node's name
    stranger.set(zmq::sockopt::curve_serverkey, keys.srv_keys.public_key);
    stranger.set(zmq::sockopt::curve_publickey, stranger_keys.public_key);
    stranger.set(zmq::sockopt::curve_secretkey, stranger_keys.secret_key);
    stranger.connect(endpoint);
    stranger.send(zmq::str_buffer("intruder"), zmq::send_flags::dontwait);
    REQUIRE(prfaas::test::eventually([&] { return keys.refused->size() >= 1; }, 5000ms, 10ms));
    {
      std::lock_guard<std::mutex> g{keys.refused->mtx};
      auto& r = keys.refused->seen.front();
      CHECK(r.key == stranger_keys.public_key);
      CHECK(r.address == "127.0.0.1");
      CHECK(r.plane == "control");
      CHECK(r.reason == "unknown_key");
    }
    // Refused before the message could pass: the next one through is the good client's.
    good.send(zmq::str_buffer("after"), zmq::send_flags::none);
    auto next = receive(router);
    REQUIRE(next);
    CHECK((*next)[1] == "after");
  }

  SECTION("a client without CURVE fails the handshake and never delivers") {
    auto plain = dealer(ctx, "plain");
    zmq_socket_monitor(plain.handle(), "inproc://plain-monitor",
                       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_DISCONNECTED);
    zmq::socket_t monitor{ctx, zmq::socket_type::pair};
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect("inproc://plain-monitor");
    plain.connect(endpoint);
    plain.send(zmq::str_buffer("plaintext"), zmq::send_flags::dontwait);
    zmq::pollitem_t item{monitor.handle(), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&item, 1, 5s) == 1); // the handshake ended the connection
    good.send(zmq::str_buffer("after"), zmq::send_flags::none);
    auto next = receive(router);
    REQUIRE(next);
    CHECK((*next)[1] == "after");
    zmq_socket_monitor(plain.handle(), nullptr, 0);
  }

  SECTION("a client that expects another server key never gets through") {
    auto confused = dealer(ctx, "cli");
    auto other = prfaas::generate_curve_keypair();
    confused.set(zmq::sockopt::curve_serverkey, other.public_key); // not srv's
    confused.set(zmq::sockopt::curve_publickey, keys.cli_keys.public_key);
    confused.set(zmq::sockopt::curve_secretkey, keys.cli_keys.secret_key);
    confused.connect(endpoint);
    confused.send(zmq::str_buffer("lost"), zmq::send_flags::dontwait);
    good.send(zmq::str_buffer("after"), zmq::send_flags::none);
    // The server cannot read a HELLO sealed for another key: nothing from it arrives.
    auto next = receive(router);
    REQUIRE(next);
    CHECK((*next)[1] == "after");
  }
}

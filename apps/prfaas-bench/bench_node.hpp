#pragma once

// What the two-process benchmarks (transport, transfer) share: a live node of a
// benchmark deployment, free ports, waiting for the peer, zero-copy sends of memory
// the benchmark owns.

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <zmq.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/actor_system.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/node.hpp"

namespace prfaas::bench {

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  zmq::context_t ctx;
  zmq::socket_t s{ctx, zmq::socket_type::router};
  s.bind("tcp://127.0.0.1:*");
  auto ep = s.get(zmq::sockopt::last_endpoint);
  return std::stoi(ep.substr(ep.rfind(':') + 1));
}

/// For zmq::message_t over memory the benchmark keeps alive itself.
inline void noop_free(void*, void*) {}

/// The raw ZeroMQ side of a benchmark: a ROUTER on `endpoint` receiving
/// [identity, op, data?] until `stop`, handing each message to `on_message` with the
/// socket (to answer on) and the op letter. Counting ('C'/'K') and queries ('Q', answered
/// "messages bytes") are done here; other ops go to `on_message`.
template <class OnMessage>
void raw_router(zmq::context_t& ctx, const std::string& endpoint, const std::atomic<bool>& stop,
                OnMessage on_message) {
  zmq::socket_t router{ctx, zmq::socket_type::router};
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::rcvhwm, 100000);
  router.set(zmq::sockopt::rcvbuf, 4 << 20);
  router.bind(endpoint);
  uint64_t messages = 0, bytes = 0;
  while (!stop) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    if (!(item.revents & ZMQ_POLLIN))
      continue;
    for (;;) {
      zmq::message_t id, op, data;
      if (!router.recv(id, zmq::recv_flags::dontwait))
        break;
      (void)router.recv(op);
      if (op.more())
        (void)router.recv(data);
      char c = op.size() ? *static_cast<const char*>(op.data()) : '?';
      if (c == 'C' || c == 'K') {
        ++messages;
        bytes += data.size();
      }
      if (c == 'Q') {
        auto text = std::to_string(messages) + " " + std::to_string(bytes);
        router.send(id, zmq::send_flags::sndmore);
        router.send(zmq::buffer(text), zmq::send_flags::none);
      } else {
        on_message(router, c, id, op, data);
      }
    }
  }
}

/// One live node of a benchmark deployment with everything it needs, in the order it
/// needs it (the actor system and the ZeroMQ context outlive the node).
struct live_node {
  deployment_config dep;
  actor_registry reg = actor_registry::with_builtins();
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  zmq::context_t zctx{1};
  std::unique_ptr<node> self;

  live_node(const std::string& yaml, const std::string& name)
      : dep(parse_deployment(yaml, "<bench>")) {
    configure_actor_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    node_options opts;
    opts.zmq = &zctx;
    self = std::make_unique<node>(*sys, dep, name, reg, opts);
    self->start();
  }
  ~live_node() { self->stop(); }
};

/// Waits until `n`'s failure detector sees `peer` up; throws after ~30 s.
inline void wait_until_up(caf::scoped_actor& self, node& n, const std::string& peer = "server") {
  for (int i = 0; i < 1500; ++i) {
    bool up = false;
    self->request(n.transport(), std::chrono::seconds(1), peers_atom_v)
        .receive(
            [&](std::vector<peer_view>& v) {
              for (auto& p : v)
                up = up || (p.node == peer && p.state == peer_state::up);
            },
            [](caf::error&) {});
    if (up)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error(peer + " node did not come up");
}

} // namespace prfaas::bench

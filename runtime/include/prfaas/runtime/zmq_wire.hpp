#pragma once

// The production wire (docs/architecture.md, "Runtime"): one ZeroMQ ROUTER per node,
// bound to the node's control endpoint, receives everything; one DEALER per peer,
// connected to that peer's ROUTER, sends. Each pair of nodes thus shares two
// connections, one per direction, and each ROUTER sees exactly one pipe per peer,
// named by the peer's routing id (its node name).
//
// Socket options:
//  * ROUTER_HANDOVER: a restarted peer reconnecting under its name takes the pipe over;
//  * ROUTER_MANDATORY on the ROUTER (it never sends today; should it ever, an unknown
//    peer is an error rather than a silent drop);
//  * IMMEDIATE on the DEALERs: messages queue only on completed connections, so a send
//    to an unconnected peer fails at once instead of piling up inside ZeroMQ;
//  * small LINGER, TCP keepalive (ZMTP heartbeats only when configured: libzmq 4.3.4
//    can abort on them, see transport_config), bounded HWMs;
//  * with security on, CURVE on both (security.hpp): the ROUTER admits only the
//    deployment's keys, each DEALER checks it reached the peer's key.
//
// Threads: the ROUTER lives in the wire's I/O thread. A DEALER is used by whichever
// thread sends, under the peer's mutex (ZeroMQ allows a socket to move between
// threads across a full memory barrier) — so a send costs no thread hand-off. What
// ZeroMQ cannot take at once (HWM, not yet connected) waits in a bounded per-peer
// backlog that the I/O thread retries every millisecond, oldest first.

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/security.hpp"
#include "prfaas/runtime/wire.hpp"

namespace prfaas {

/// Liveness options on `s`: ZMTP pings when configured (off by default, see
/// transport_config::zmq_heartbeat_interval) and TCP keepalive. Both planes use it.
void zmq_liveness(zmq::socket_t& s, const transport_config& cfg);

class zmq_wire final : public frame_wire {
public:
  /// `peers` maps node name to control endpoint. Throws zmq::error_t when the
  /// endpoint cannot be bound. `sec` null: plaintext (NULL mechanism).
  zmq_wire(zmq::context_t& ctx, std::string self, std::string bind_endpoint,
           std::map<std::string, std::string> peers, transport_config cfg, logger_ptr log,
           security_ptr sec = nullptr);
  ~zmq_wire() override;

  void start(inbound_handler on_frame, drop_handler on_drop) override;
  send_status send(const std::string& peer, std::string header, bulk_ptr bulk) override;
  /// Serializes `header` into the ZeroMQ message it is sent as: no string, no copy.
  send_status send_message(const std::string& peer, const google::protobuf::MessageLite& header,
                           bulk_ptr bulk) override;
  size_t purge(const std::string& peer) override;
  void stop() override;
  std::string local_endpoint() const override { return endpoint_; }
  bool own_thread() const override { return true; }

  /// Messages waiting in the backlogs (not yet handed to ZeroMQ).
  size_t backlog() const;

private:
  struct outbound {
    zmq::message_t header; ///< handed to ZeroMQ as is (sent: left empty)
    bulk_ptr bulk;
  };
  struct peer_link {
    std::mutex mtx;
    zmq::socket_t dealer;
    std::deque<outbound> backlog;
  };

  void run();
  /// Sends `o` now if nothing waits before it, else queues it (bounded).
  send_status enqueue(const std::string& peer, outbound o);
  /// Hands `o` to the DEALER without blocking; false if ZeroMQ cannot take it now.
  bool try_send(peer_link& p, outbound& o);
  /// Retries every backlog; true if something is still waiting.
  bool flush_backlogs();
  /// One inbound message: the peer's identity and its first two frames (`count`
  /// frames in all).
  struct received {
    zmq::message_t id;
    zmq::message_t parts[2];
    size_t count = 0;
  };
  /// Reads the next message; without `block`, false at once if none, with it false
  /// after the router's receive timeout.
  bool receive(received& r, bool block = false);
  /// Hands `r` to on_frame_.
  void deliver(received& r, bool more_waiting);
  /// Delivers `first` (if given) and what waits behind it; true if the batch limit
  /// was hit (or stopping).
  bool drain_inbound(received* first = nullptr);

  std::string self_;
  transport_config cfg_;
  logger_ptr log_;
  zap_ptr zap_; ///< with security: keeps the context's ZAP handler answering for router_
  zmq::socket_t router_;
  /// With security: reports handshakes refused before ZAP (peers without CURVE).
  std::unique_ptr<handshake_monitor> monitor_;
  std::string endpoint_;
  std::map<std::string, std::unique_ptr<peer_link>> peers_; ///< fixed after construction
  std::atomic<size_t> backlog_{0};

  inbound_handler on_frame_;
  drop_handler on_drop_;
  std::thread io_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
};

} // namespace prfaas

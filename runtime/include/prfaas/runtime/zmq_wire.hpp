#pragma once

// The production wire: one ZeroMQ ROUTER per node, bound to the node's control
// endpoint. Each pair of nodes shares exactly one connection, opened by the node
// whose name sorts first; both ends address it by the other's name. Socket options
// follow STACK_NOTES §7:
//  * ROUTING_ID = node name, learned by the peer in the handshake (with IMMEDIATE,
//    libzmq names a connected pipe by the peer's routing id, so a second connection
//    per pair would fight over the same name — hence one per pair);
//  * ROUTER_MANDATORY: a send to an unconnected peer fails (counted), never vanishes;
//  * ROUTER_HANDOVER: a restarted peer reconnecting under its name takes over;
//  * IMMEDIATE: queue only on completed connections;
//  * small LINGER, ZMTP heartbeats (HEARTBEAT_IVL/TIMEOUT/TTL), bounded HWMs.
// The socket lives only in the wire's I/O thread. Senders (any thread) append to a
// bounded per-peer queue and wake the thread through an eventfd.

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/wire.hpp"

namespace prfaas {

class zmq_wire final : public frame_wire {
public:
  /// `peers` maps node name to control endpoint. Throws zmq::error_t when the
  /// endpoint cannot be bound.
  zmq_wire(zmq::context_t& ctx, std::string self, std::string bind_endpoint,
           std::map<std::string, std::string> peers, transport_config cfg, logger_ptr log);
  ~zmq_wire() override;

  void start(inbound_handler on_frame, drop_handler on_drop) override;
  send_status send(const std::string& peer, std::string header, bulk_ptr bulk) override;
  void stop() override;
  std::string local_endpoint() const override { return endpoint_; }

  /// Messages waiting in the per-peer queues (not yet handed to ZeroMQ).
  size_t backlog() const;

private:
  struct outbound {
    std::string header;
    bulk_ptr bulk;
  };
  struct peer_queue {
    std::string routing_id; ///< the peer's node name
    std::deque<outbound> items;
  };

  void run();
  bool drain_outbound();  ///< true if something is left (HWM reached)
  bool drain_inbound();   ///< true if the batch limit was hit
  void wake();

  std::string self_;
  std::map<std::string, std::string> peer_endpoints_;
  transport_config cfg_;
  logger_ptr log_;
  zmq::socket_t router_;
  std::string endpoint_;
  int wake_fd_ = -1;

  mutable std::mutex mtx_;
  std::map<std::string, peer_queue> queues_;
  size_t queued_ = 0;

  inbound_handler on_frame_;
  drop_handler on_drop_;
  std::thread io_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
};

} // namespace prfaas

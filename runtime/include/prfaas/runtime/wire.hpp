#pragma once

// The byte-moving layer under the transport: ZeroMQ in production, a simulated
// network driven by the actor clock in deterministic tests. A wire knows peers by
// node name and moves (header, optional bulk) frames; everything above it
// (envelopes, requests, retries, failure detection) is shared by both.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <google/protobuf/message_lite.h>

#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

/// One inbound message as read from a wire. `header` stays valid for the duration
/// of the callback only; `bulk` may be kept.
struct inbound_frame {
  std::string_view peer; ///< transport-level identity of the sender (informational)
  const std::byte* header = nullptr;
  size_t header_size = 0;
  bulk_ptr bulk;    ///< second frame, if any
  size_t parts = 0; ///< number of frames after the identity (1 = header only)
  /// With CURVE: the node the connection authenticated as (the ZAP handler's user id,
  /// from the peer's public key). The envelope's source must be that node.
  std::string_view authenticated_node;
  /// More frames were already waiting behind this one (the receiver is busy) and
  /// follow it at once, on this thread. False on the last frame a wire hands up in
  /// one go: a receiver that holds work back for a burst must not wait past it.
  bool more_waiting = false;
};

/// Result of handing a frame to the wire.
enum class send_status : uint8_t { queued, unreachable, overflow, unknown_peer, stopped };

class frame_wire {
public:
  using inbound_handler = std::function<void(const inbound_frame&)>;
  /// Called when a frame already accepted by `send` is lost later (peer gone).
  using drop_handler = std::function<void(drop_reason)>;

  virtual ~frame_wire() = default;

  /// Starts moving frames; `on_frame` is called for every inbound message, from
  /// the wire's own thread (ZeroMQ) or from an actor's context (simulation).
  virtual void start(inbound_handler on_frame, drop_handler on_drop) = 0;

  /// Thread-safe, never blocks. `header` is a serialized envelope.
  virtual send_status send(const std::string& peer, std::string header, bulk_ptr bulk) = 0;
  /// The same for an envelope not yet serialized: a wire that can serialize it
  /// straight into its own frame memory (ZeroMQ) saves a buffer and a copy per frame.
  virtual send_status send_message(const std::string& peer,
                                   const google::protobuf::MessageLite& header, bulk_ptr bulk) {
    return send(peer, header.SerializeAsString(), std::move(bulk));
  }

  /// Drops what waits for `peer` (it went down); returns how many frames.
  virtual size_t purge(const std::string& peer) = 0;

  /// Stops moving frames and releases sockets. Idempotent; no callback runs after it returns.
  virtual void stop() = 0;

  /// Where the wire actually listens (e.g. the port chosen for `tcp://127.0.0.1:*`).
  virtual std::string local_endpoint() const = 0;

  /// True when `on_frame` runs on a thread of the wire's own, which then may run an
  /// actor inline (transport_config::inline_delivery); false from an actor's context.
  virtual bool own_thread() const { return false; }
};

using wire_ptr = std::shared_ptr<frame_wire>;

} // namespace prfaas

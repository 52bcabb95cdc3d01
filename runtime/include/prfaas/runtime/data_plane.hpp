#pragma once

// The KVCache data plane: moves a transfer — an ordered list of chunks (serialized
// kv_chunks, or any bytes) — from one node to a named sink on another, on sockets of
// its own so bulk bytes never delay control-plane heartbeats.
//
// Guarantees, per transfer:
//  * chunks are pushed as they are produced (layer-wise streaming: sending overlaps
//    the prefill that produces them) and delivered to the sink all at once, in push
//    order, only when every chunk arrived intact;
//  * every chunk carries an xxh3 checksum of its bytes; a corrupted chunk is
//    detected by the receiver, nacked and re-sent;
//  * credit-based flow control: a sender never has more than the receiver's window
//    in flight; pacing (optional) keeps each peer below a configured rate;
//  * a chunk not acknowledged in time is re-sent; a retried transfer resumes from
//    the chunks not yet acknowledged (the receiver keeps what it has);
//  * `done` is called exactly once: success when the receiver confirmed the whole
//    transfer, or an error (timeout, cancelled, peer unknown, stopped).
// Transfers are identified by (source node, id); ids are chosen by the sender.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/security.hpp"

namespace prfaas {

// data_fault_config (the seeded fault points) lives in config.hpp: it is read from
// the deployment file's `data_plane.faults`.

/// How the data plane reaches one peer.
struct data_link_config {
  uint32_t connections = 1; ///< parallel ZeroMQ connections (TCP streams) to the peer
  uint64_t rate_bps = 0;    ///< pacing in bits/s over all connections; 0 = unpaced
};

struct data_plane_config {
  std::string node;                              ///< this node's name
  std::string bind;                              ///< this node's data endpoint
  std::map<std::string, std::string> peers;      ///< node name → data endpoint
  std::map<std::string, data_link_config> links; ///< per peer; missing → `default_link`
  data_link_config default_link;
  uint32_t window_chunks = 64;                             ///< credit: unacked chunks per transfer
  uint64_t window_bytes = 256ull << 20;                    ///< credit: unacked bytes per peer
  duration chunk_timeout = std::chrono::milliseconds(500); ///< re-send an unacked chunk
  duration transfer_timeout = std::chrono::seconds(
      30); ///< fail a transfer this long after its producer's last step (open, chunk, finish)
  duration receive_timeout = std::chrono::seconds(60); ///< forget a partial inbound one
  uint64_t max_chunk_bytes = 256ull << 20;             ///< larger inbound chunks are rejected
  /// The data plane's threads run this many nice steps below the node's (0 = same), so
  /// a saturating transfer does not delay control-plane messages on a busy machine.
  int nice = 10;
  data_fault_config faults;
  /// CURVE on every socket (security.hpp); null = plaintext.
  security_ptr security;
};

/// Timing and counts of one transfer. Times are steady_clock.
struct transfer_stats {
  uint64_t bytes = 0; ///< payload bytes of all chunks (once)
  uint32_t chunks = 0;
  uint32_t retransmits = 0;                         ///< chunks sent again (timeout, nack or resume)
  uint32_t corrupted = 0;                           ///< chunks the receiver found damaged
  std::chrono::steady_clock::time_point opened{};   ///< open()
  std::chrono::steady_clock::time_point finished{}; ///< finish() (last chunk produced)
  std::chrono::steady_clock::time_point completed{}; ///< receiver confirmed / delivered
  /// Time on the wire not hidden behind production: completed − finished.
  duration exposed_wire_time() const {
    return completed > finished ? duration{completed - finished} : duration{0};
  }
};

struct transfer_outcome {
  uint64_t id = 0;
  bool ok = false;
  std::string error; ///< why it failed (names the peer and the chunk where relevant)
  transfer_stats stats;
};

/// A completed inbound transfer.
struct received_transfer {
  uint64_t id = 0;
  std::string source; ///< sending node
  std::string sink;
  std::string meta;             ///< opaque bytes given to open()
  std::vector<bulk_ptr> chunks; ///< in push order
  transfer_stats stats;
};

/// What the link monitor reads: the data plane's view of one peer.
struct data_link_report {
  std::string peer;
  uint64_t bytes_sent = 0; ///< including re-sends
  uint64_t bytes_acked = 0;
  uint64_t bytes_in_flight = 0; ///< sent, not yet acknowledged
  uint64_t bytes_queued = 0;    ///< pushed, waiting for credit or pacing (backlog)
  uint64_t retransmits = 0;
  uint64_t corrupted = 0;
  uint32_t active_transfers = 0;
  double throughput_bps = 0; ///< acknowledged bits/s, smoothed
  std::chrono::steady_clock::time_point updated{};
};

class data_plane {
public:
  using done_handler = std::function<void(transfer_outcome)>;
  using sink_handler = std::function<void(received_transfer)>;

  virtual ~data_plane() = default;

  /// Binds, connects lazily to peers on first use. Throws std::runtime_error naming
  /// the endpoint when it cannot bind.
  virtual void start() = 0;
  /// Fails every open transfer ("stopped"), closes sockets. Idempotent; no handler
  /// runs after it returns.
  virtual void stop() = 0;

  /// Starts transfer `id` to `sink` on `peer`. `done` runs exactly once, on the data
  /// plane's thread. An unknown peer fails at once (through `done`).
  virtual void open(uint64_t id, const std::string& peer, const std::string& sink, std::string meta,
                    done_handler done) = 0;
  /// Appends one chunk; thread-safe, never blocks. Ignored after cancel/failure.
  virtual void push(uint64_t id, std::vector<std::byte> chunk) = 0;
  /// No more chunks will be pushed.
  virtual void finish(uint64_t id) = 0;
  /// Gives up on a transfer: `done` gets error "cancelled"; the receiver drops it.
  virtual void cancel(uint64_t id) = 0;

  /// Completed transfers addressed to `sink` go to `handler`, on the data plane's
  /// thread. Transfers to a sink nobody listens on are refused (the sender fails).
  virtual void add_sink(const std::string& sink, sink_handler handler) = 0;
  virtual void remove_sink(const std::string& sink) = 0;

  /// One report per peer ever used.
  virtual std::vector<data_link_report> links() const = 0;
  /// Where it actually listens (port resolved for `tcp://host:*`).
  virtual std::string local_endpoint() const = 0;
};

using data_plane_ptr = std::shared_ptr<data_plane>;

/// The ZeroMQ data plane: one ROUTER bound on `bind`, `connections` DEALERs per peer,
/// one I/O thread. Counts into `m` (prfaas_data_* series).
data_plane_ptr make_zmq_data_plane(data_plane_config cfg, metrics& m, logger_ptr log);

} // namespace prfaas

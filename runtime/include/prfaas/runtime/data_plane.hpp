#pragma once

// The KVCache data plane: moves a transfer — an ordered list of chunks (serialized
// kv_chunks, or any bytes) — from one node to a named sink on another, on sockets of
// its own so bulk bytes never delay control-plane heartbeats.
//
// Guarantees, per transfer:
//  * chunks are pushed as they are produced (layer-wise streaming: sending overlaps
//    the prefill that produces them) and handed to the sink in push order, each once,
//    intact; the sink learns the end (`end`, exactly once) only when every chunk
//    arrived, or that the transfer was dropped (`abort`);
//  * every chunk carries an xxh3 checksum of its bytes; a corrupted chunk is
//    detected by the receiver, nacked and re-sent;
//  * credit-based flow control: the receiver lands chunks in a bounded pool of reused
//    buffers (buffer_pool.hpp) and grants a sender only chunks it has buffers for, so
//    a full pool stops the sender instead of growing memory; a transfer larger than
//    the pool streams through it (the sink consumes in order, buffers come back);
//    pacing (optional) keeps each peer below a configured rate;
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
#include "prfaas/runtime/buffer_pool.hpp"
#include "prfaas/runtime/peer_epochs.hpp"
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

/// Credit and timeouts (window_chunks, chunk_timeout, ...) come from data_plane_limits.
struct data_plane_config : data_plane_limits {
  std::string node;         ///< this node's name
  uint64_t incarnation = 0; ///< this node's incarnation (in every frame)
  /// Fencing, shared with the control plane: frames from a stale or fenced incarnation
  /// of their source are dropped (peer_epochs.hpp). Null: not checked.
  std::shared_ptr<peer_epochs> epochs;
  std::string bind;                              ///< this node's data endpoint
  std::map<std::string, std::string> peers;      ///< node name → data endpoint
  std::map<std::string, data_link_config> links; ///< per peer; missing → `default_link`
  data_link_config default_link;
  /// The data plane's threads run this many nice steps below the node's (0 = same), so
  /// a saturating transfer does not delay control-plane messages on a busy machine
  /// (`data_plane.nice`; 0 where compute threads keep the cores busy and a transfer is on
  /// the path to the first token, as under engine: llama).
  int nice = 10;
  data_fault_config faults;
  /// Where received chunks land (a chunk larger than a buffer is kept as it arrived);
  /// 0 buffers = no pool: every chunk is kept as it arrived, credit is window_chunks.
  buffer_pool_config receive_pool;
  /// What producers fill and push (send_pool()); 0 buffers = none.
  buffer_pool_config send_pool;
  /// CURVE on every socket (security.hpp); null = plaintext.
  security_ptr security;
  /// Chunk payloads on plain TCP connections of their own, read straight into receive
  /// pool buffers (control frames stay on ZeroMQ). Off with `security` (the bytes would
  /// travel unencrypted): chunks then go on ZeroMQ too.
  bool bulk_tcp = true;
  /// Queue-delay control of the bulk connections (data_plane/delay_control.hpp): the
  /// queueing delay (smoothed RTT over min RTT) the sender keeps under by pacing;
  /// zero (the default) turns it off.
  duration queue_delay_target{0};
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
  std::vector<bulk_ptr> chunks; ///< in push order (empty for a stream sink's `end`)
  transfer_stats stats;
};

/// An inbound transfer as a stream sink sees it before its end.
struct inbound_ref {
  uint64_t id = 0;
  std::string source;
  std::string sink;
  std::string meta; ///< opaque bytes given to open()
};

/// A sink that consumes a transfer as it arrives. All three run on the data plane's
/// thread, one transfer's calls in order: `chunk` for index 0, 1, 2, ... each once,
/// then `end` (success; `received_transfer::chunks` empty) or `abort` (cancelled by the
/// sender, expired, or re-opened for another sink: forget what `chunk` gave), never
/// both. `abort` runs only for a transfer `chunk` has seen. The bytes may be a receive
/// pool buffer: it goes back when the last reference is dropped, and until then the
/// receiver has one buffer less to grant — copy out and drop promptly.
struct stream_handlers {
  std::function<void(const inbound_ref&, uint32_t index, bulk_ptr bytes)> chunk;
  std::function<void(received_transfer)> end;
  std::function<void(const inbound_ref&, const std::string& reason)> abort;
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
  /// Appends one chunk; thread-safe, never blocks. Ignored after cancel/failure. The
  /// bytes are sent from where they are (no copy) and released once acknowledged:
  /// fill a send_pool() buffer and share() it, so steady-state sending allocates nothing.
  virtual void push(uint64_t id, bulk_ptr chunk) = 0;
  /// The same for bytes in a vector (kept until acknowledged).
  void push(uint64_t id, std::vector<std::byte> chunk);
  /// Buffers for producers to fill and push; null when there is none (simulation, or
  /// `send_pool.buffers` 0). Its size bounds what producers have pushed and not yet seen
  /// acknowledged: a producer waiting in acquire() is back-pressure.
  virtual buffer_pool_ptr send_pool() const { return nullptr; }
  /// No more chunks will be pushed.
  virtual void finish(uint64_t id) = 0;
  /// Gives up on a transfer: `done` gets error "cancelled"; the receiver drops it.
  virtual void cancel(uint64_t id) = 0;

  /// Transfers addressed to `sink` stream to `handlers` (see stream_handlers).
  /// Transfers to a sink nobody listens on are refused (the sender fails).
  virtual void add_stream_sink(const std::string& sink, stream_handlers handlers) = 0;
  /// Whole transfers: `handler` gets each completed transfer with all its chunks, on
  /// the data plane's thread. The chunks are never receive pool buffers (those are
  /// copied out as they arrive), so a sink that keeps transfers cannot starve the pool.
  void add_sink(const std::string& sink, sink_handler handler);
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

#pragma once

// The ZeroMQ data plane's internals, shared by its source files:
//   zmq_data_plane.cpp          lifecycle, the I/O loop, commands, peers, timeouts
//   data_plane/sender.cpp       outbound transfers: credit, pacing, re-sends, replies
//   data_plane/receiver.cpp     inbound transfers: checksums, acks, resume, delivery
//   data_plane/credit.cpp       the receiver's grants; bulk.cpp, the TCP bulk path
//   data_plane/link_reports.cpp links() and the transfer histograms
//   sim_live_plane.cpp          the simulation's sockets (dp_sim_port) and turns
//
// Threads: every socket and every piece of transfer state below belongs to the one
// I/O thread. Other threads touch only the command queue (`cmd_mtx_`), the sinks
// (`sinks_mtx_`) and the published link reports (`links_mtx_`).
//
// In simulation (sim_live_plane.cpp) the same code runs without sockets or a thread:
// a dp_sim_port carries the frames and reads virtual time, and the simulation calls
// sim_turn() where the I/O loop would have woken.

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/data_plane/frame.hpp"
#include "prfaas/runtime/data_plane/token_bucket.hpp"
#include "delay_control.hpp"

namespace prfaas::detail {

using dp_clock = std::chrono::steady_clock;
using chunk_bytes = bulk_ptr;

/// A copy of `bytes` with one byte flipped (the corrupt fault; sender_faults.cpp).
chunk_bytes corrupted_copy(const bulk_buffer& bytes, uint64_t at);

/// A message referring to `bytes` without copying them (empty for null or no bytes).
zmq::message_t message_of(const chunk_bytes& bytes);

/// A request from any thread to the I/O thread.
struct dp_command {
  enum class op : uint8_t { open, push, finish, cancel } what = op::push;
  uint64_t id = 0;
  std::string peer;
  std::string sink;
  std::string meta;
  data_plane::done_handler done;
  chunk_bytes chunk;
  uint64_t checksum = 0;
  dp_clock::time_point at{};
};

/// One chunk of an outbound transfer.
struct out_chunk {
  enum class state : uint8_t { queued, in_flight, acked };
  chunk_bytes data; ///< released once acknowledged
  uint64_t size = 0;
  uint64_t checksum = 0;
  state st = state::queued;
  bool resend = false; ///< nacked: send again as soon as pacing allows
  int conn = -1;       ///< connection of the latest transmission
  uint32_t seq = 0; ///< that connection's sequence number for it (0 = held back, not on the wire)
  dp_clock::time_point sent_at{};
};

/// A transfer this node sends. Lives from open() until `done` ran.
struct outbound_transfer {
  uint64_t id = 0;
  std::string peer;
  std::string sink;
  std::string meta;
  data_plane::done_handler done;
  bool accepted = false; ///< the receiver acked the OPEN
  bool open_sent = false;
  dp_clock::time_point open_sent_at{};
  std::vector<out_chunk> chunks; ///< in push order
  size_t next = 0;               ///< first chunk never sent (or skipped)
  std::set<uint32_t> in_flight;  ///< indices sent and not acknowledged
  uint32_t acked = 0;
  /// The receiver's grant: chunks with a lower index may be sent (0 until the OPEN ack).
  uint32_t limit = 0;
  dp_clock::time_point limit_at{};             ///< when the grant last grew (or was asked for)
  std::unordered_map<uint32_t, uint64_t> held; ///< receiver already holds (resume)
  bool finished = false;
  bool done_sent = false;
  dp_clock::time_point done_sent_at{};
  dp_clock::time_point deadline{};
  uint64_t queued_bytes = 0; ///< pushed, never sent (counted in the peer's backlog)
  transfer_stats stats;
};

/// Sender side of the bulk path: one TCP connection beside DEALER k of a peer, a queue
/// of frames being written (the payload from the producer's buffer, no copy).
struct bulk_out {
  struct frame {
    std::string head; ///< [u32 header length][u64 payload length][header]
    chunk_bytes payload;
    size_t written = 0; ///< of head + payload
  };
  int fd = -1;
  bool connected = false;
  std::deque<frame> queue;
  /// When the connection last moved bytes: written into the kernel, or the kernel's
  /// send queue (SIOCOUTQ: unsent and unacknowledged) shrinking. A chunk behind a
  /// slow but moving connection is late, not lost.
  dp_clock::time_point progress{};
  uint64_t outq = 0; ///< the kernel's send queue when last looked at
  dp_clock::time_point outq_at{};
};

/// Receiver side of the bulk path: one accepted connection, read frame by frame.
struct bulk_in {
  enum class part : uint8_t { hello, prefix, header, payload };
  int fd = -1;
  std::string reply_to; ///< the sender's DEALER routing id (from its hello): acks go there
  part at = part::hello;
  std::string buf; ///< bytes of the part being read (hello, prefix, header)
  size_t need = 0; ///< bytes the part has in all
  uint64_t payload_bytes = 0;
  data_wire::header h;
  pool_buffer into;                ///< where the payload lands (a receive pool buffer) ...
  std::vector<std::byte> spill;    ///< ... or here (no pool, larger than a buffer, discarded)
  size_t got = 0;                  ///< payload bytes read
  dp_clock::time_point progress{}; ///< when bytes last arrived
  bool discard = false;            ///< read and dropped (no credit, unknown transfer)
};

/// One frame in simulation: what a ZeroMQ message would carry.
struct dp_sim_frame {
  std::string identity; ///< the sending connection's routing id (toward a ROUTER)
  std::string head;     ///< the encoded header
  bulk_ptr payload;     ///< second part, when `has_payload`
  bool has_payload = false;
};

/// The sockets and the clock of a data plane running in simulation: frames go to
/// the simulated fabric, time is virtual, turns of the loop are scheduled events.
class dp_sim_port {
public:
  virtual ~dp_sim_port() = default;
  virtual dp_clock::time_point now() const = 0;
  /// A turn of the loop at `t` (at once when not in the future); turns coalesce.
  virtual void wake_at(dp_clock::time_point t) = 0;
  /// Frame `f` from this node's connection `conn` to `peer`'s ROUTER (`chunk`: it
  /// carries a chunk, whose wire size the fabric may scale).
  virtual void send(const std::string& peer, size_t conn, dp_sim_frame f, bool chunk) = 0;
  /// Frame `f` from this node's ROUTER back to the connection `f.identity`; false when
  /// no such connection exists (ROUTER_MANDATORY's unroutable).
  virtual bool reply(dp_sim_frame f) = 0;
};

/// One DEALER to a peer.
struct dp_connection {
  zmq::socket_t socket;
  std::deque<dp_sim_frame> sim_in; ///< simulation: replies arrived, not yet read
  uint64_t in_flight_bytes = 0;
  uint32_t next_seq = 1;           ///< numbers chunk transmissions on this connection
  uint32_t acked_seq = 0;          ///< highest sequence number acknowledged or nacked
  dp_clock::time_point last_ack{}; ///< progress: re-send timers start no earlier
};

/// Everything about one peer, sender side.
struct dp_peer {
  std::string name;
  std::string endpoint;
  data_link_config link;
  std::vector<dp_connection> conns; ///< empty until first used
  std::vector<bulk_out> bulk;       ///< beside conns, once the peer announced its bulk port
  uint16_t bulk_port = 0;           ///< 0: chunks go on ZeroMQ
  token_bucket bucket;
  bool blackhole = false;      ///< fault: every frame to this peer vanishes
  std::vector<uint64_t> order; ///< its transfers, open order
  data_link_report report;
  uint64_t acked_at_sample = 0;
  dp_clock::time_point sample_at{};
  bool sampled = false;
  prometheus::Counter* bytes_sent = nullptr;
  prometheus::Counter* chunks_sent = nullptr;
  prometheus::Counter* retransmits = nullptr;
  prometheus::Gauge* in_flight_gauge = nullptr;
  prometheus::Gauge* queued_gauge = nullptr;
  /// Delay-based pacing of the bulk connections (delay_control.hpp; data_plane/pacing.cpp).
  delay_control delay;
  dp_clock::time_point delay_at{}; ///< last sample
  dp_clock::time_point busy_at{};  ///< last sample with bytes in flight
  uint64_t delay_acked = 0;        ///< the connections' bytes acknowledged at that sample
  bool delay_paced = false;        ///< a pacing rate is set on the sockets
  prometheus::Gauge* pacing_gauge = nullptr;
  prometheus::Gauge* queue_delay_gauge = nullptr;

  dp_peer(std::string n, std::string ep, data_link_config l, dp_clock::time_point now,
          double queue_delay_target_s);
};

/// A transfer this node receives, keyed by (source node, id). After delivery it stays
/// as a tombstone (no chunks) so that late or repeated frames are answered DONE.
///
/// Chunks 0 .. streamed.size()-1 went to the sink; `pending` holds those that arrived
/// ahead of a gap. The sender may send indices below `limit`; `reserved` receive pool
/// buffers are set aside for the granted chunks that have not arrived.
struct inbound_transfer {
  std::string source;
  uint64_t id = 0;
  std::string sink;
  std::string meta;
  std::map<uint32_t, std::pair<bulk_ptr, uint64_t>> pending; ///< index → (bytes, checksum)
  std::vector<uint64_t> streamed;                            ///< checksums, by index
  std::optional<uint32_t> total;
  uint32_t limit = 0;
  uint32_t reserved = 0;
  /// Nothing arrived for a while (a sender that died, or is computing): its reserved
  /// buffers were given back; the grant stands, and a chunk arriving against it takes a
  /// spare buffer (or is dropped unanswered and re-sent).
  bool idle = false;
  std::string reply_to;      ///< routing id of the sender's latest frame: credit goes there
  std::string open_reply_to; ///< routing id its OPEN came from (connected, surely)
  bool delivered = false;
  dp_clock::time_point last_activity{};
  transfer_stats stats;

  size_t arrived() const { return streamed.size() + pending.size(); }
  bool has(uint32_t index) const { return index < streamed.size() || pending.count(index) != 0; }
};

/// An eventfd that wakes the I/O thread: commands waiting, stop, or (`released`) a
/// receive pool buffer came back.
struct wake_signal {
  int fd = -1;
  std::atomic<bool> released{false};
  wake_signal();
  ~wake_signal();
  wake_signal(const wake_signal&) = delete;
  wake_signal& operator=(const wake_signal&) = delete;
  void notify() const;
  void drain() const;
};

/// A chunk held back by the delay fault.
struct delayed_frame {
  dp_clock::time_point due{};
  uint64_t id = 0;
  uint32_t index = 0;
};

class zmq_data_plane_impl final : public data_plane,
                                  public std::enable_shared_from_this<zmq_data_plane_impl> {
public:
  /// `sim`: run in simulation over that port (no sockets, no thread); null: ZeroMQ.
  zmq_data_plane_impl(data_plane_config cfg, metrics& m, logger_ptr log,
                      std::shared_ptr<dp_sim_port> sim = nullptr);
  ~zmq_data_plane_impl() override;

  void start() override;
  void stop() override;
  void open(uint64_t id, const std::string& peer, const std::string& sink, std::string meta,
            done_handler done) override;
  using data_plane::push;
  void push(uint64_t id, bulk_ptr chunk) override;
  buffer_pool_ptr send_pool() const override { return tx_pool_; }
  void finish(uint64_t id) override;
  void cancel(uint64_t id) override;
  void add_stream_sink(const std::string& sink, stream_handlers handlers) override;
  void remove_sink(const std::string& sink) override;
  std::vector<data_link_report> links() const override;
  std::string local_endpoint() const override;

  // -- simulation (sim_live_plane.cpp delivers, the port schedules) ---------------------
  /// The routing id of this node's connection `conn` (to every peer).
  std::string routing_id_of(size_t conn) const;
  /// A frame arrived at this node's ROUTER.
  void sim_inbound(dp_sim_frame f);
  /// A reply arrived on connection `conn` to `peer`; dropped when that connection is gone.
  void sim_reply(const std::string& peer, size_t conn, dp_sim_frame f);
  /// One turn of the loop at the port's now; schedules the next.
  void sim_turn();

private:
  // -- zmq_data_plane.cpp: loop, commands, bookkeeping -------------------------------
  void run();
  /// One round of the loop after the wait (`items`: the poll's, null in simulation).
  void step(const std::vector<zmq::pollitem_t>* items);
  dp_clock::time_point clock_now() const { return sim_ ? sim_->now() : dp_clock::now(); }
  /// Wakes the loop: the eventfd, or a turn in simulation.
  void wake();
  void enqueue(dp_command c);
  void process_commands();
  void shutdown_io();
  void drop_frame(const char* reason);
  /// False (and the frame counted dropped) when, with CURVE, it names a source other than
  /// the node its connection authenticated as (`head`: the frame's header part).
  bool authentic(const data_wire::header& h, zmq::message_t& head);
  /// Fencing: false (and the frame counted dropped) when it comes from an incarnation of
  /// its source older than one heard, or one declared down that has not learned it.
  bool source_current(const data_wire::header& h);
  /// `h` encoded as this node sends it: with this node's incarnation.
  std::string encode_ours(data_wire::header h) const {
    h.incarnation = cfg_.incarnation;
    return data_wire::encode(h);
  }
  void publish_links(dp_clock::time_point now, bool force = false);
  void configure(zmq::socket_t& s);
  std::optional<dp_clock::duration> next_wake(dp_clock::time_point now) const;

  // -- data_plane/sender.cpp ---------------------------------------------------------
  void on_open(dp_command& c);
  void on_push(dp_command& c);
  void on_finish(dp_command& c);
  void on_cancel(dp_command& c);
  dp_peer* peer_for(const std::string& name);
  void connect(dp_peer& p);
  void pump(dp_clock::time_point now);
  /// Sends what credit and pacing allow for one peer; false when its sockets are full.
  bool pump_peer(dp_peer& p, dp_clock::time_point now);
  /// Puts one frame on connection `conn` of `p`; false when its queue is full.
  bool send_frame(dp_peer& p, size_t conn, const data_wire::header& h, const std::string* small,
                  const chunk_bytes& bulk);
  /// A control frame (OPEN, DONE, CANCEL) on the first connection that takes it.
  bool send_control(dp_peer& p, const data_wire::header& h, const std::string* small);
  /// Connections of `p`, least bytes in flight first.
  std::vector<size_t> by_load(const dp_peer& p) const;
  bool chance(double p);
  /// The header of a CHUNK frame carrying chunk `index` of `t` (its seq is the
  /// connection's, set as it goes out).
  data_wire::header chunk_header(const outbound_transfer& t, uint32_t index) const;
  enum class chunk_send : uint8_t { sent, blocked, paced };
  chunk_send send_chunk(dp_peer& p, outbound_transfer& t, uint32_t index, bool again,
                        dp_clock::time_point now);
  /// Books chunk `index` of `t` as sent now on connection `conn` with sequence `seq`
  /// (credit, pacing, counters; `again`: a retransmission).
  void mark_sent(dp_peer& p, outbound_transfer& t, uint32_t index, size_t conn, uint32_t seq,
                 bool again, dp_clock::time_point now);
  void flush_delayed(dp_clock::time_point now);
  void drain_replies(dp_peer& p, size_t conn);
  /// One reply read from connection `conn` of `p`: decoded, checked, handled.
  void reply_arrived(dp_peer& p, size_t conn, const zmq::message_t& head,
                     const zmq::message_t* payload);
  void on_reply(dp_peer& p, size_t conn, const data_wire::header& h, const zmq::message_t* payload);
  void mark_acked(dp_peer& p, outbound_transfer& t, uint32_t index, dp_clock::time_point now);
  void raise_limit(outbound_transfer& t, uint32_t limit, dp_clock::time_point now);
  void on_open_ack(dp_peer& p, outbound_transfer& t, const data_wire::header& h,
                   const zmq::message_t* payload, dp_clock::time_point now);
  void check_timeouts(dp_clock::time_point now);
  /// Runs `done` once and forgets the transfer.
  void complete(uint64_t id, bool ok, std::string error, const char* outcome);
  /// The completed-transfer histograms (seconds, exposed seconds, bytes) by peer.
  void observe_completed(const std::string& peer, const transfer_stats& st);
  std::string fail_detail(const outbound_transfer& t) const;

  // -- data_plane/bulk.cpp -----------------------------------------------------------
  void bulk_listen();
  void bulk_close_all();
  /// Poll items for the bulk sockets; `bulk_poll_base_` is where they start.
  void bulk_poll_items(std::vector<zmq::pollitem_t>& items);
  void bulk_after_poll(const std::vector<zmq::pollitem_t>& items);
  /// The peer announced (or re-announced) its bulk port.
  void bulk_announced(dp_peer& p, uint16_t port);
  /// Queues a CHUNK frame on bulk connection `conn`; false when it is not usable.
  bool bulk_send(dp_peer& p, size_t conn, const data_wire::header& h, const chunk_bytes& payload);
  void bulk_flush(dp_peer& p, size_t conn);
  /// When bulk connection `conn` of `p` last made progress; the epoch if it has none.
  dp_clock::time_point bulk_progress(dp_peer& p, size_t conn, dp_clock::time_point now);
  void bulk_fail(dp_peer& p, size_t conn, const char* what, int err);
  void bulk_accept();
  /// Reads what connection `i` has; false when it closed or broke the protocol.
  bool bulk_read(bulk_in& c);
  /// The header of a bulk frame is in; false when it breaks the protocol.
  bool bulk_header_done(bulk_in& c);
  /// `n` more payload bytes of `c` arrived.
  void bulk_payload_got(bulk_in& c, size_t n);
  void bulk_payload_done(bulk_in& c);
  /// A payload that stopped arriving for `quiet` leaves its pool buffer (copied out);
  /// true when one did.
  bool bulk_release_stalled(dp_clock::time_point now, dp_clock::duration quiet);

  // -- data_plane/pacing.cpp ----------------------------------------------------------
  /// Samples each busy peer's bulk connections (TCP_INFO) and sets their pacing rate.
  void control_delay(dp_clock::time_point now);

  // -- data_plane/receiver.cpp -------------------------------------------------------
  void drain_inbound();
  /// One frame read from the ROUTER: decoded, checked, handled.
  void inbound_arrived(const zmq::message_t& identity, zmq::message_t& head,
                       zmq::message_t* payload);
  void on_inbound(const zmq::message_t& identity, const data_wire::header& h,
                  zmq::message_t* payload);
  /// False when it could not be queued (counted as dropped unless `quiet`).
  bool reply_header(const zmq::message_t& identity, const data_wire::header& h,
                    const std::string* payload, bool quiet = false);
  /// Answers frame `h` on `identity` with a frame of kind `k`.
  void answer(const zmq::message_t& identity, const data_wire::header& h, data_wire::kind k,
              uint16_t flags = 0, const std::string* body = nullptr, uint32_t credit = 0,
              uint32_t total = 0);
  void refuse(const zmq::message_t& identity, const data_wire::header& h,
              const std::string& reason);
  prometheus::Counter& path_counter(const char* path);
  prometheus::Counter& peer_counter(std::map<std::string, prometheus::Counter*>& cache,
                                    const std::string& peer, const char* name, const char* help);
  void inbound_open(const zmq::message_t& identity, const data_wire::header& h,
                    zmq::message_t* payload);
  void inbound_chunk(const zmq::message_t& identity, const data_wire::header& h,
                     zmq::message_t* payload);
  void inbound_done(const zmq::message_t& identity, const data_wire::header& h);
  /// Hands the chunks that follow the streamed ones to the sink; false (and the
  /// transfer refused and forgotten) when the sink is gone.
  bool stream_ready(inbound_transfer& in, const zmq::message_t& identity);
  /// Ends the transfer if every chunk went to the sink; answers DONE on `identity`.
  void maybe_deliver(const std::pair<std::string, uint64_t>& key, const zmq::message_t& identity);
  /// Forgets an undelivered inbound transfer, telling its sink when it saw chunks.
  void drop_inbound(std::map<std::pair<std::string, uint64_t>, inbound_transfer>::iterator it,
                    const std::string& reason);
  void expire_inbound(dp_clock::time_point now);
  /// Lands a chunk's bytes: in a receive pool buffer when one is free for it, else
  /// kept as the message it arrived in. Null when neither credit nor a buffer is left.
  bulk_ptr land(inbound_transfer& in, uint32_t index, zmq::message_t& payload);
  /// Whether chunk `index` may take a receive buffer now (granted, or a spare one).
  bool may_land(const inbound_transfer& in, uint32_t index) const;
  /// Receive pool buffers neither in use nor reserved for a granted chunk.
  uint64_t spare_buffers() const;
  /// The transfer a CHUNK belongs to, when it is one to take; else null, the frame
  /// answered (DONE, a repeated ACK, REFUSE) or dropped. Shared by both paths.
  inbound_transfer* chunk_target(const zmq::message_t& identity, const data_wire::header& h);
  /// Checks a chunk's `size` bytes at `data` and takes them (`landed`: where they lie,
  /// null when no buffer was free); answers on `identity`. Shared by both paths.
  void chunk_accept(const zmq::message_t& identity, const data_wire::header& h,
                    inbound_transfer& in, const std::byte* data, size_t size, bulk_ptr landed);
  /// Recounts `in.reserved` for its grant and the chunks that arrived.
  void recount(inbound_transfer& in);
  /// Raises `in.limit` as free buffers allow; true when it grew. `yield`: `in` is being
  /// served (a chunk of it landed), so it leaves a buffer for each transfer holding none.
  bool grant(inbound_transfer& in, bool yield = false);
  /// Offers freed buffers to transfers waiting for credit (CREDIT frames), those
  /// holding no buffer first, `served` (which just yielded) last.
  void regrant(const inbound_transfer* served = nullptr);
  void regrant(inbound_transfer& in);
  /// Gives back the reservations of transfers nothing arrived for in a while, so a dead
  /// sender's grant does not starve the others.
  void release_idle(dp_clock::time_point now);
  /// An open transfer waits for its first receive buffer, and none is spare.
  bool waiting_for_credit() const;
  /// The transfer is active again (a frame arrived): it may reserve again.
  void touch(inbound_transfer& in, dp_clock::time_point now);
  std::shared_ptr<stream_handlers> sink_for(const std::string& sink);

  data_plane_config cfg_;
  metrics& metrics_;
  logger_ptr log_;
  std::string identity_nonce_;

  // Any thread.
  mutable std::mutex cmd_mtx_;
  std::deque<dp_command> commands_;
  bool closed_ = false; ///< the I/O thread took its last commands
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::thread io_;
  std::string endpoint_;

  mutable std::mutex sinks_mtx_;
  std::map<std::string, std::shared_ptr<stream_handlers>> sinks_;

  buffer_pool_ptr rx_pool_; ///< null: chunks are kept as they arrived
  buffer_pool_ptr tx_pool_;
  /// Wakes the I/O thread; shared with the receive pool's release listener, which may
  /// run after this object is gone (on the thread dropping a buffer).
  std::shared_ptr<wake_signal> wake_;

  mutable std::mutex links_mtx_;
  std::vector<data_link_report> published_;

  // I/O thread only.
  zmq::context_t ctx_;
  zap_ptr zap_; ///< with security: the ZAP handler answers for router_
  zmq::socket_t router_;
  /// With security: reports handshakes refused before ZAP (peers without CURVE).
  std::unique_ptr<handshake_monitor> monitor_;
  std::map<std::string, std::unique_ptr<dp_peer>> peers_;
  std::map<uint64_t, outbound_transfer> outbound_;
  std::map<std::pair<std::string, uint64_t>, inbound_transfer> inbound_;
  std::deque<delayed_frame> delayed_;
  uint64_t rx_reserved_ = 0; ///< sum of inbound `reserved`
  uint32_t rx_owed_ = 0;     ///< transfers the last yielding grant left a buffer for
  /// The receive pool's buffers set aside for granted chunks, and taken (landed,
  /// arriving, or out of order): both 0 once nothing arrives (a leak shows here).
  prometheus::Gauge* rx_reserved_gauge_ = nullptr;
  prometheus::Gauge* rx_taken_gauge_ = nullptr;
  int bulk_listen_fd_ = -1; ///< -1: no bulk path here
  uint16_t bulk_port_ = 0;
  std::vector<std::unique_ptr<bulk_in>> bulk_in_;
  size_t bulk_poll_base_ = 0;
  std::mt19937_64 rng_;
  bool faults_on_ = false;
  bool blocked_ = false; ///< a socket refused a frame: poll again soon
  std::optional<dp_clock::duration> pacing_wait_;
  dp_clock::time_point last_expiry_{};
  dp_clock::time_point last_publish_{};
  std::map<std::string, prometheus::Counter*> dropped_;
  std::map<std::string, prometheus::Counter*> corrupt_;
  std::map<std::string, prometheus::Counter*> received_bytes_;
  std::map<std::string, prometheus::Counter*> chunk_paths_;
  // Simulation only.
  std::shared_ptr<dp_sim_port> sim_;
  std::deque<dp_sim_frame> sim_inbound_; ///< arrived at the ROUTER, not yet read
  bool in_turn_ = false;                 ///< stop() from a handler: shut down after the turn
};

} // namespace prfaas::detail

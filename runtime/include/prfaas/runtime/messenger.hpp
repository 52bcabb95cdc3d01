#pragma once

// The thread-safe core of a node's transport. It owns:
//  * the local actor directory (name -> actor);
//  * envelope encoding and validation of every inbound frame;
//  * both halves of cross-node requests, without a detour through an actor:
//    - outbound: callers `request()` the messenger's outbound proxy (see remote.hpp).
//      Its enqueue runs in the caller's thread and puts the REQUEST on the wire; the
//      RESPONSE is enqueued straight into the caller's mailbox as the answer to its
//      CAF request. An unanswered request is probed until its deadline (after
//      retry_interval, then doubling up to max_retry_interval), then fails with
//      request_timeout. A probe carries only the request's id: the receiver answers
//      PROGRESS while it holds the request, the cached answer once done, or
//      request_unknown when the request never arrived (lost) — only then is the
//      request, with its payload, sent again. A prefill order waiting 10 s in a queue
//      therefore costs a few probes, not its prompt re-sent every 2 s. One timer per node drives
//      this (the transport actor's, armed for the earliest due request), not one per request: a
//      request costs CAF's clock thread nothing in the common case;
//    - inbound: a REQUEST is de-duplicated and enqueued straight into the destination
//      actor as a CAF request from the reply proxy; the actor's answer (a reply or an
//      error) comes back through the reply proxy, in the actor's own thread, and goes
//      onto the wire.
// Heartbeats go to the transport actor, which owns failure detection.
//
// This mirrors how CAF's own middleman proxies remote actors: no extra thread hop on
// either side, so a cross-node round trip costs what ZeroMQ costs plus two mailbox hops.
//
// Inline delivery (transport_config::inline_delivery, on by default, ZeroMQ wire
// only): a frame for an idle actor, with no frame waiting behind it, runs that actor
// for one message on the wire thread — the way CAF's workers run what they enqueue
// — instead of waking a worker. A request's handling and a response's requester then
// cost no thread hand-off beyond ZeroMQ's own: on a VM where waking an idle vCPU
// takes ~50 us, that is most of a round trip. Under load (frames waiting) a frame for
// the same actor as the frame before it still runs inline: a stream to one actor gains
// nothing from a worker (an actor handles one message at a time) but a wake-up and a
// hand-off per burst — on two cores a quarter of a pipelined message's CPU. Frames for
// other actors go to the workers, so busy nodes keep their parallelism across actors;
// actors the inline one wakes go to the workers too.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/mailbox_element.hpp>

#include "prfaas/messages/membership.hpp"
#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/dedup_cache.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/peer_epochs.hpp"
#include "prfaas/runtime/wire.hpp"
#include "prfaas/wire/envelope.pb.h"

namespace prfaas {

/// A validated inbound envelope on its way to the transport actor (heartbeats).
struct inbound_envelope {
  wire::Envelope env;
  bulk_ptr bulk;
};
using inbound_ptr = std::shared_ptr<inbound_envelope>;

/// Why decoding rejected a frame, or nothing.
struct decode_result {
  bool ok = false;
  drop_reason reason = drop_reason::malformed;
};

/// Validates a frame against this node's identity and limits. Pure; no counters.
decode_result decode_frame(const inbound_frame& f, const std::string& self_node,
                           uint64_t self_incarnation, const transport_config& cfg,
                           wire::Envelope& out);

class inline_unit; // messenger.cpp: the wire thread as a CAF execution unit

class messenger : public std::enable_shared_from_this<messenger> {
public:
  using clock_type = std::chrono::steady_clock;

  messenger(caf::actor_system& sys, std::string node, uint64_t incarnation,
            std::set<std::string> peers, transport_config cfg, std::shared_ptr<metrics> m,
            logger_ptr log);
  ~messenger();

  messenger(const messenger&) = delete;
  messenger& operator=(const messenger&) = delete;

  /// Starts the wire; heartbeats and request timers go to `transport_actor`.
  void start(wire_ptr w, caf::actor transport_actor);
  /// Stops the wire (idempotent); pending requests fail with shutting_down.
  void stop();

  // -- local directory (thread-safe) -----------------------------------------

  void register_actor(const std::string& name, caf::actor handle);
  /// Removes `name` only if it still maps to `handle` (a restarted actor may have
  /// re-registered under the same name already). Requests handed to `handle` and not
  /// answered are answered now with an error: an actor that crashed while handling a
  /// request never answers it, and its requester should not wait for its deadline.
  void unregister_actor(const std::string& name, const caf::actor& handle);
  caf::actor lookup(const std::string& name) const;

  // -- sending (thread-safe) --------------------------------------------------

  /// One-way message; local destinations are delivered without the wire.
  send_status send_oneway(const remote_message& msg);
  /// Sends a prepared envelope to `peer`; fills in version, source incarnation.
  send_status send_envelope(const std::string& peer, wire::Envelope& env, bulk_ptr bulk);

  /// The actor to `request()` with a remote_message: the outbound half of requests.
  const caf::actor& outbound() const { return outbound_; }

  // -- driven by the transport actor ------------------------------------------

  /// The request timer fired: re-sends every request that is due, fails those at
  /// their deadline. Returns when to fire next and the timer's generation, or
  /// nothing (no request waits, or `generation` belongs to a superseded timer).
  std::optional<std::pair<clock_type::duration, uint64_t>> sweep(uint64_t generation);
  /// The failure detector's view of a peer: pins requests to the incarnation known,
  /// and fails requests (and drops backlogs) when the peer goes down.
  void peer_changed(const membership_event& ev);
  /// Forgets inbound requests whose deadline passed without an answer from the actor.
  void expire_inbound();
  /// The transport actor is gone, and with it the timers that end requests: fail
  /// every outstanding request now and refuse new ones (`reason` says why).
  void timers_lost(const caf::error& reason);

  /// The node's fault points (transport.drop, transport.duplicate); set before start.
  void set_faults(std::shared_ptr<fault_points> f) { faults_ = std::move(f); }

  const std::string& node() const { return node_; }
  uint64_t incarnation() const { return incarnation_; }
  const std::set<std::string>& peers() const { return peers_; }
  /// What this node knows of its peers' incarnations (fencing), shared with the data plane.
  const peer_epochs_ptr& epochs() const { return epochs_; }
  const transport_config& config() const { return cfg_; }
  transport_metrics& counters() { return counters_; }
  metrics& node_metrics() { return *metrics_; }
  const logger_ptr& log() const { return log_; }
  /// One line per pending outbound request (peer/actor, type, attempts, time left):
  /// for reports of what is still held.
  std::vector<std::string> describe_outbound() const;
  /// Cross-node requests waiting for an answer (outbound) or for a local actor's
  /// answer (inbound), counting only those waiting longer than `older_than`: at
  /// quiescence, periodic traffic is young and anything old is held by mistake.
  size_t pending_outbound(clock_type::duration older_than = {}) const;
  size_t pending_inbound(clock_type::duration older_than = {}) const;

private:
  struct outbound_request {
    caf::strong_actor_ptr sender;
    caf::message_id mid;
    std::string peer;
    wire::Envelope env; ///< kept for re-sends
    bulk_ptr bulk;
    clock_type::time_point deadline;
    clock_type::time_point due; ///< next re-send or the deadline, whichever is first
    clock_type::time_point started;
    bool resend_payload = false; ///< the receiver said it does not hold it: send it whole
  };
  struct inbound_request {
    dedup_cache::key key;
    wire::Envelope answer; ///< addresses and correlation id filled in
    clock_type::time_point deadline;
    caf::actor_id actor = 0; ///< the local actor asked (0: not handed to one yet)
    clock_type::time_point received;
  };
  struct peer_status {
    uint64_t incarnation = 0;
    peer_state state = peer_state::down;
  };

  clock_type::time_point now() const;
  /// Hands serialized bytes to the wire and counts the outcome.
  send_status send_bytes(const std::string& peer, std::string header, bulk_ptr bulk);
  /// Runs `send` (a call into the wire) under the transport.drop and
  /// transport.duplicate fault points, then counts the outcome.
  template <class Send> send_status send_faulty(const std::string& peer, size_t bytes, Send&& send);
  /// Counts a send's outcome (sent, or why not); returns `st`.
  send_status count_send(const std::string& peer, size_t bytes, send_status st);
  void on_frame(const inbound_frame& f);
  void count_drop(drop_reason r, const inbound_frame& f, const char* detail);

  // outbound requests
  void on_outbound(caf::mailbox_element_ptr& what);
  /// `eu`: the execution unit to wake `to` in (null: CAF's scheduler).
  void answer(const caf::strong_actor_ptr& to, caf::message_id mid, caf::message msg,
              caf::execution_unit* eu = nullptr);
  void fail(outbound_request& r, caf::error err);
  /// Removes request `id` (out_mtx_ held); returns it.
  outbound_request take(std::unordered_map<uint64_t, outbound_request>::iterator i);
  void on_response(wire::Envelope& env, bulk_ptr bulk, caf::execution_unit* eu);
  /// Where an inbound frame's actor runs: the wire thread's unit (inline) or null (the
  /// workers). Wire thread only.
  caf::execution_unit* inline_unit_for(const inbound_frame& f, const wire::Envelope& env);

  /// A one-way frame, handed to its actor.
  void on_oneway(wire::Envelope& env, const inbound_frame& f, caf::execution_unit* eu);

  // inbound requests
  void on_request(wire::Envelope& env, bulk_ptr bulk, caf::execution_unit* eu);
  /// A probe: PROGRESS, the cached answer, or request_unknown.
  void on_probe(const dedup_cache::key& key, wire::Envelope& answer, clock_type::time_point t);
  void on_reply(caf::mailbox_element_ptr& what);
  void reply(const dedup_cache::key& key, wire::Envelope& answer, bulk_ptr bulk);
  /// Answers with an error every request handed to local actor `actor` (named `name`).
  void fail_inbound_of(const std::string& name, caf::actor_id actor);

  caf::actor_system& sys_;
  std::string node_;
  uint64_t incarnation_;
  std::set<std::string> peers_;
  transport_config cfg_;
  std::shared_ptr<metrics> metrics_;
  std::shared_ptr<fault_points> faults_ = std::make_shared<fault_points>();
  transport_metrics counters_;
  logger_ptr log_;

  mutable std::shared_mutex dir_mtx_;
  std::unordered_map<std::string, caf::actor> directory_;

  caf::actor outbound_;    ///< proxy: outbound requests
  caf::actor reply_proxy_; ///< proxy: answers of local actors to inbound requests
  /// Runs actors on the wire thread (inline delivery); null when off. Wire thread only.
  std::unique_ptr<inline_unit> inline_;
  /// The destination actor of the last frame for an actor (wire thread only): under
  /// load, a frame for that same actor still runs inline (a stream to one actor), its
  /// actor held back until the burst is in and then run once for all of it.
  std::string last_destination_;

  mutable std::mutex out_mtx_;
  std::unordered_map<uint64_t, outbound_request> outbound_requests_;
  std::set<std::pair<clock_type::time_point, uint64_t>> due_; ///< (due, id), earliest first
  std::optional<clock_type::time_point> armed_;               ///< when the request timer fires next
  uint64_t timer_generation_ = 0;                             ///< of the timer that counts
  std::map<std::string, peer_status> peer_status_;
  /// Fencing (peer_epochs.hpp), shared with the data plane: a frame from an older
  /// incarnation than one heard is dropped (stale_source), one from an incarnation
  /// declared down that has not acknowledged it too (fenced), heartbeats excepted.
  peer_epochs_ptr epochs_;
  uint64_t next_request_id_ = 1;

  mutable std::mutex in_mtx_;
  dedup_cache dedup_;
  std::unordered_map<uint64_t, inbound_request> inbound_requests_; ///< by local sequence
  uint64_t next_inbound_seq_ = 1;

  wire_ptr wire_;
  caf::actor transport_;
  std::atomic<bool> running_{false};
  std::atomic<bool> timers_{true};             ///< false once the transport actor is gone
  std::atomic<uint64_t> drop_log_budget_{100}; ///< rate-limits drop log lines
};

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::inbound_ptr)

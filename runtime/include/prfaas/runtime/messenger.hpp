#pragma once

// The thread-safe core of a node's transport: the local actor directory, envelope
// encoding and validation, and the one-way fast path. Inbound one-way messages go
// straight from the wire to the destination actor; requests, responses and
// heartbeats go to the node's transport actor, which owns retries, de-duplication
// and failure detection.

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/wire.hpp"
#include "prfaas/wire/envelope.pb.h"

namespace prfaas {

/// A validated inbound envelope on its way to the transport actor.
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

class messenger {
public:
  messenger(std::string node, uint64_t incarnation, std::set<std::string> peers,
            transport_config cfg, std::shared_ptr<metrics> m, logger_ptr log);
  ~messenger();

  messenger(const messenger&) = delete;
  messenger& operator=(const messenger&) = delete;

  /// Starts the wire; inbound requests/responses/heartbeats go to `transport_actor`.
  void start(wire_ptr w, caf::actor transport_actor);
  /// Stops the wire (idempotent). No message is delivered after it returns.
  void stop();

  // -- local directory (thread-safe) -----------------------------------------

  void register_actor(const std::string& name, caf::actor handle);
  /// Removes `name` only if it still maps to `handle` (a restarted actor may have
  /// re-registered under the same name already).
  void unregister_actor(const std::string& name, const caf::actor& handle);
  caf::actor lookup(const std::string& name) const;

  // -- outbound (thread-safe) -------------------------------------------------

  /// One-way message; local destinations are delivered without the wire.
  send_status send_oneway(const remote_message& msg);
  /// Sends a prepared envelope to `peer`; fills in version, source incarnation.
  send_status send_envelope(const std::string& peer, wire::Envelope& env, bulk_ptr bulk);
  /// Prepares an envelope for sending (version, incarnation, bulk size) and returns
  /// its bytes; with send_serialized, lets the caller keep a copy (de-duplication).
  std::string serialize(wire::Envelope& env, const bulk_ptr& bulk) const;
  send_status send_serialized(const std::string& peer, std::string header, bulk_ptr bulk);

  const std::string& node() const { return node_; }
  uint64_t incarnation() const { return incarnation_; }
  const std::set<std::string>& peers() const { return peers_; }
  const transport_config& config() const { return cfg_; }
  transport_metrics& counters() { return counters_; }
  metrics& node_metrics() { return *metrics_; }
  const logger_ptr& log() const { return log_; }

private:
  void on_frame(const inbound_frame& f);
  void count_drop(drop_reason r, const inbound_frame& f, const char* detail);

  std::string node_;
  uint64_t incarnation_;
  std::set<std::string> peers_;
  transport_config cfg_;
  std::shared_ptr<metrics> metrics_;
  transport_metrics counters_;
  logger_ptr log_;

  mutable std::shared_mutex dir_mtx_;
  std::unordered_map<std::string, caf::actor> directory_;

  wire_ptr wire_;
  caf::actor transport_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> drop_log_budget_{100}; ///< rate-limits drop log lines
};

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::inbound_ptr)

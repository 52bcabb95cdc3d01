#pragma once

// Heartbeat failure detection, as a plain class: the transport actor feeds it
// heartbeats and clock ticks and publishes the events it returns. Time is passed
// in, so the same code runs on the real clock and on CAF's virtual clock.
//
// A peer is `suspect` once nothing was heard for `suspect_misses` intervals and
// `down` after `misses` intervals (detection bound: interval * misses, plus one
// tick of slack). A heartbeat from a higher incarnation means the peer restarted:
// the old incarnation goes down (if it was not already) and the new one comes up.
// Heartbeats from lower incarnations are stale and ignored.
//
// Fencing: a peer declared down that was only paused or cut off comes back with the
// same incarnation. It stays down until it acknowledges that it learned (its
// heartbeat's fence_ack reaches the number of times this detector declared that
// incarnation down, downs()); until then it may still be finishing work this node gave
// up on (see peer_epochs.hpp).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prfaas/messages/membership.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas {

class failure_detector {
public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit failure_detector(failure_detector_config cfg);

  /// Starts tracking `peer` (initially down with incarnation 0).
  void add_peer(const std::string& peer);

  /// Something was heard from `peer` at `now`, acknowledging `fence_ack` declarations of
  /// its incarnation down (the default: all of them). Returns the resulting events.
  /// Unknown peers are ignored (they are not part of the deployment).
  std::vector<membership_event> heard(const std::string& peer, uint64_t incarnation, time_point now,
                                      uint64_t fence_ack = UINT64_MAX);

  /// Re-evaluates every peer at `now`.
  std::vector<membership_event> tick(time_point now);

  peer_state state(const std::string& peer) const;
  uint64_t incarnation(const std::string& peer) const;
  /// How many times the current incarnation of `peer` was declared down.
  uint64_t downs(const std::string& peer) const;
  size_t up_count() const;
  /// Stale heartbeats ignored so far (from an incarnation older than the known one).
  uint64_t stale_heartbeats() const { return stale_; }
  /// Heartbeats of a fenced peer that did not yet acknowledge (it stayed down).
  uint64_t unacknowledged_heartbeats() const { return unacked_; }

  const failure_detector_config& config() const { return cfg_; }

private:
  struct peer_info {
    peer_state state = peer_state::down;
    uint64_t incarnation = 0;
    time_point last_heard{};
    uint64_t downs = 0; ///< declarations of this incarnation down
  };

  failure_detector_config cfg_;
  std::map<std::string, peer_info> peers_;
  uint64_t stale_ = 0;
  uint64_t unacked_ = 0;
};

} // namespace prfaas

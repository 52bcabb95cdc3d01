#pragma once

// Fencing: what a node knows of each peer's incarnation, shared by its control plane
// (messenger) and its data plane, read on their threads without locks.
//
//  * newest: the newest incarnation heard of the peer. A frame from an older one — a
//    process that was replaced, or woke from a pause after its successor spoke — is
//    stale.
//  * fenced: an incarnation this node's failure detector declared down and that has not
//    yet acknowledged learning it (the peer was paused or cut off, not dead). Its
//    frames are dropped until it does: whatever it sends from before it learned is work
//    this node already gave up on (failed over, re-prefilled elsewhere).
//  * notices: how many times a peer said it declared *this* node down. Work held for
//    that peer, or to be delivered to it, that was taken on before the count moved is
//    stale; an actor compares the count it noted at admission with the current one.
//
// Heartbeats carry the protocol (wire::Heartbeat): a node's heartbeat to a peer it
// declared down names that peer's incarnation and how often; the peer records the
// notice here, tells its actors (fenced_event) and acknowledges in its own heartbeats;
// the acknowledgement lifts the fence. The peer set is fixed at construction.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace prfaas {

class peer_epochs {
public:
  explicit peer_epochs(const std::set<std::string>& peers);

  enum class verdict : uint8_t {
    accept,  ///< the newest incarnation known (and not fenced), or a newer one
    stale,   ///< an incarnation older than one already heard
    fenced,  ///< the incarnation this node declared down, not yet acknowledged
    unknown, ///< not a peer of the deployment (judged elsewhere)
  };
  /// Judges a frame from `peer` at `incarnation`, noting it when it is the newest.
  verdict judge(const std::string& peer, uint64_t incarnation) noexcept;
  /// Notes `incarnation` of `peer` (the failure detector heard it); true unless stale.
  bool note(const std::string& peer, uint64_t incarnation) noexcept;

  /// This node declared `incarnation` of `peer` down: fence it until it acknowledges.
  void fence(const std::string& peer, uint64_t incarnation) noexcept;
  /// `incarnation` of `peer` acknowledged the notice (or a newer one appeared).
  void lift(const std::string& peer, uint64_t incarnation) noexcept;
  bool is_fenced(const std::string& peer, uint64_t incarnation) const noexcept;

  /// A peer said, for the `count`-th time, that it declared this node down; true
  /// when that is news (count above the last one recorded).
  bool notice(const std::string& peer, uint64_t count) noexcept;
  /// Notices received from `peer` so far (0 for an unknown peer).
  uint64_t notices(const std::string& peer) const noexcept;

  uint64_t newest(const std::string& peer) const noexcept;

private:
  struct entry {
    std::atomic<uint64_t> newest{0};
    std::atomic<uint64_t> fenced{0}; ///< 0 = none
    std::atomic<uint64_t> notices{0};
  };
  const entry* find(const std::string& peer) const noexcept;
  entry* find(const std::string& peer) noexcept;

  std::map<std::string, std::unique_ptr<entry>> peers_;
};

using peer_epochs_ptr = std::shared_ptr<peer_epochs>;

const char* to_string(peer_epochs::verdict);

} // namespace prfaas

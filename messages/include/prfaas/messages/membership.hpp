#pragma once

#include <cstdint>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>

namespace prfaas {

enum class peer_state : uint8_t { up, suspect, down };

const char* to_string(peer_state);

/// Delivered to subscribers of a node's failure detector when a peer changes
/// state. A restarted peer shows up as `down` for its old incarnation (if it was
/// not already down) followed by `up` with the new incarnation.
struct membership_event {
  std::string peer;         ///< node name
  uint64_t incarnation = 0; ///< the incarnation this event is about
  peer_state state = peer_state::down;
  /// For `down`: how long since the peer was last heard from.
  int64_t silent_ns = 0;
};

/// Delivered to fence subscribers when a peer says it declared this node down (this
/// node was paused or cut off long enough; see peer_epochs.hpp). That peer has given up
/// on everything it shared with this node — it failed over the requests, cancelled the
/// orders — so work held for it, or to be delivered to it, is stale: drop it.
struct fenced_event {
  std::string peer;         ///< the node that declared this one down
  uint64_t incarnation = 0; ///< of this node, as declared down
  uint64_t count = 0;       ///< how many times that peer did so (peer_epochs::notices)
};

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::membership_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::fenced_event)

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

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::membership_event)

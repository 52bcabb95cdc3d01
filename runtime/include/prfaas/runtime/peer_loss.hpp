#pragma once

// What a role that holds work shared with other nodes does when one of them is lost to
// it: that peer went down (membership_event), or it said it had declared this node
// down while this node was paused or cut off (fenced_event, peer_epochs.hpp). Either
// way the peer gave up everything it shared with this node — its requests failed over,
// its orders re-run elsewhere — so whatever this node still holds for it is stale.

#include <functional>
#include <string>

#include <caf/all.hpp>

#include "prfaas/messages/membership.hpp"
#include "prfaas/runtime/node_context.hpp"

namespace prfaas {

/// `lost(peer, why)`: why is "is down" or "declared this node down".
using peer_lost_handler = std::function<void(const std::string& peer, const std::string& why)>;

/// Subscribes `self` to its node's membership events and fencing notices and returns
/// the handlers that call `lost`; join them to the actor's behaviour with or_else.
template <class Self>
caf::message_handler on_peer_lost(Self* self, node_context& ctx, peer_lost_handler lost) {
  self->send(ctx.transport(), caf::subscribe_atom_v, caf::actor_cast<caf::actor>(self));
  self->send(ctx.transport(), fence_atom_v, caf::actor_cast<caf::actor>(self));
  return {
      [lost](const membership_event& e) {
        if (e.state == peer_state::down)
          lost(e.peer, "is down");
      },
      [lost](const fenced_event& e) { lost(e.peer, "declared this node down"); },
  };
}

} // namespace prfaas

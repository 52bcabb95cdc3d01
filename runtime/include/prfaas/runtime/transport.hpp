#pragma once

// The node's transport actor: heartbeats, failure detection and membership events,
// and the timers of cross-node requests (re-sends, deadlines). The requests
// themselves travel through the messenger (see messenger.hpp) without passing
// through this actor. One per node; actors reach it through node_context.
//
// Guarantees of a request (messenger + this actor): it ends exactly once, with the
// reply, an error from the remote handler, `peer_down` when the failure detector
// gives up on the peer, or `request_timeout` at its deadline. A retried request runs
// at most once per destination incarnation (de-duplication by source node,
// incarnation and id).

#include <memory>
#include <vector>

#include <caf/typed_actor.hpp>
#include <caf/replies_to.hpp>

#include "prfaas/messages/membership.hpp"
#include "prfaas/messages/remote_message.hpp"
#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/messenger.hpp"

namespace prfaas {

/// A peer as the failure detector sees it.
struct peer_view {
  std::string node;
  uint64_t incarnation = 0;
  peer_state state = peer_state::down;
};

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<prfaas::peer_view>)

namespace prfaas {

using transport_actor = caf::typed_actor<
    /// One-way message to any address (local or remote).
    caf::reacts_to<send_atom, remote_message>,
    /// Membership events (membership_event) go to the subscriber until it dies.
    caf::reacts_to<caf::subscribe_atom, caf::actor>,
    /// Fencing notices (fenced_event) go to the subscriber until it dies.
    caf::reacts_to<fence_atom, caf::actor>,
    caf::replies_to<peers_atom>::with<std::vector<peer_view>>,
    // internal
    caf::reacts_to<inbound_atom, inbound_ptr>, caf::reacts_to<heartbeat_atom>,
    caf::reacts_to<retry_atom, uint64_t>>;

/// Spawns the transport actor of a node. It starts heartbeating immediately.
/// Stop it with an exit message; pending requests then fail with `shutting_down`.
transport_actor spawn_transport(caf::actor_system& sys, std::shared_ptr<messenger> m,
                                failure_detector_config fd);

} // namespace prfaas

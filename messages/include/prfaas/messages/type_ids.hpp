#pragma once

// In-node message vocabulary: CAF atoms of the runtime's protocols, declared once.
// Wire messages are protobuf (messages/proto); these never cross a node boundary.

#include <caf/type_id.hpp>

#include "prfaas/messages/membership.hpp"
#include "prfaas/messages/remote_message.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(prfaas, caf::first_custom_type_id)
// transport
CAF_ADD_ATOM(prfaas, prfaas, send_atom, "send")
CAF_ADD_ATOM(prfaas, prfaas, inbound_atom, "inbound")
CAF_ADD_ATOM(prfaas, prfaas, retry_atom, "retry")
CAF_ADD_ATOM(prfaas, prfaas, heartbeat_atom, "heartbeat")
CAF_ADD_ATOM(prfaas, prfaas, register_atom, "register")
CAF_ADD_ATOM(prfaas, prfaas, peers_atom, "peers")
CAF_ADD_ATOM(prfaas, prfaas, stop_atom, "stop")
// supervision
CAF_ADD_ATOM(prfaas, prfaas, restart_atom, "restart")
CAF_ADD_ATOM(prfaas, prfaas, children_atom, "children")
CAF_ADD_ATOM(prfaas, prfaas, started_atom, "started")
// serving: run code posted from another thread (actor_inbox)
CAF_ADD_ATOM(prfaas, prfaas, wake_atom, "wake")
CAF_ADD_ATOM(prfaas, prfaas, fence_atom, "fence")
CAF_END_TYPE_ID_BLOCK(prfaas)

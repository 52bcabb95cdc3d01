#pragma once

// The interface every actor reachable from other nodes implements: it receives
// remote_message (one-way or request) and answers requests with a remote_message
// or an error. The payload's protobuf type says what it is.

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "prfaas/messages/remote_message.hpp"

namespace prfaas {

using remote_actor = caf::typed_actor<caf::replies_to<remote_message>::with<remote_message>>;

} // namespace prfaas

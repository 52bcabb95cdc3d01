#pragma once

// The gateway's in-process ingress, for simulated clients. In virtual time (CAF's
// test coordinator) the gateway starts no HTTP front end — no sockets, no threads —
// and takes already-validated requests as this message instead; from there on a
// request is the same state machine as one that came over HTTP. The client reads the
// outcome from the request's stream_channel (its on_end hook says when).

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

#include "gateway/http_frontend.hpp"

namespace prfaas::serving {

struct sim_submit {
  std::shared_ptr<accepted_request> request; ///< `accepted` = the actor clock's now
};

} // namespace prfaas::serving

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::serving::sim_submit)

#pragma once

// The runtime's error category. Errors cross nodes as (code, text) in ERROR
// envelopes and come back to the requester as the same caf::error.

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

namespace prfaas {

enum class errc : uint8_t {
  none = 0,
  request_timeout = 1,  ///< no answer before the deadline (after retries)
  peer_down = 2,        ///< the failure detector declared the peer down
  unknown_actor = 3,    ///< no actor of that name on the destination node
  unknown_type = 4,     ///< the actor does not understand the payload type
  unreachable = 5,      ///< not connected / not in the deployment
  overflow = 6,         ///< outbound queue full
  remote_error = 7,     ///< the remote handler failed; text says why
  bad_request = 8,      ///< the payload did not parse or was invalid
  shutting_down = 9,    ///< the node is stopping
  escalated = 10,       ///< a supervisor exceeded its restart intensity
  overloaded = 11,      ///< the receiver's bounded queue is full; retry later
  cancelled = 12,       ///< the requester gave up (deadline, client gone)
  bad_reply = 13,       ///< the reply was not the type the role contract declares
  request_unknown = 14, ///< a probed request is not held by the receiver: send it again
  /// A KV transfer from the prefill worker to the decode worker did not complete: the
  /// path between them, or either end's data plane.
  transfer_failed = 15,
};

const char* to_string(errc);

inline constexpr caf::atom_value error_category = caf::atom("prfaas");

/// A prfaas error with a human-readable context text.
caf::error make_error(errc code, std::string text);

/// The errc of a prfaas error; errc::remote_error for errors of other categories.
errc error_code(const caf::error& e);

/// "peer_down: node-2 silent for 1.2s" for prfaas errors; CAF's rendering otherwise.
std::string describe(const caf::error& e);

} // namespace prfaas

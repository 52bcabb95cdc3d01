#pragma once

// A request's lifecycle at the gateway, as an explicit state machine:
//
//   accepted → routed → prefilling → transferring → decoding → done
//        \________\__________\____________\____________\____→ failed
//
// plus the failover edge prefilling/transferring → routed (another prefill worker,
// attempt + 1) and the resume edge decoding → routed (the decode worker's node died:
// the request continues on another decode worker from its prompt plus the tokens
// already delivered). `done` and `failed` are terminal and reached exactly once: that is
// the gateway's "every accepted request ends in exactly one outcome".
// A TokenEvent may overtake the prefill worker's reply (different senders), so
// decoding is reachable straight from prefilling, and from routed (during a
// failover the first attempt's KV may still arrive and win).

#include <cstdint>
#include <string>

namespace prfaas::serving {

enum class request_state : uint8_t {
  accepted,
  routed,
  prefilling,
  transferring,
  decoding,
  done,
  failed,
};

const char* to_string(request_state s);

class lifecycle {
public:
  request_state state() const { return state_; }
  bool terminal() const { return state_ == request_state::done || state_ == request_state::failed; }
  uint32_t attempts() const { return attempts_; }

  /// Moves to `next` if the edge exists; returns false (state unchanged) otherwise.
  /// Each entry to `prefilling` counts one prefill attempt (the first and every failover).
  bool advance(request_state next);

  /// Whether `from → to` is an edge of the machine.
  static bool allowed(request_state from, request_state to);

private:
  request_state state_ = request_state::accepted;
  uint32_t attempts_ = 0;
};

} // namespace prfaas::serving

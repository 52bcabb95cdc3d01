#pragma once

// The gateway's decisions about one request, as plain functions of what it knows: which
// token events it takes, when a lost prefill fails over or gives up, when a lost decode
// worker's request resumes, what a node's death means for it, what the periodic sweep
// does with it. The request tracker (request_tracker.hpp) applies them;
// tests/unit/gateway checks them without an actor system, with a property test that a
// stream assembled through them never repeats or skips an index.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "gateway/lifecycle.hpp"

namespace prfaas::serving::rules {

/// What a TokenEvent means for the request it names.
enum class token_verdict {
  stale_worker, ///< from a decode worker the request has left (resumed elsewhere): dropped
  duplicate,    ///< an index already taken (a re-sent event): dropped
  gap,          ///< an index past the next expected one: events were lost, resume elsewhere
  failed,       ///< the decode worker reports an error: the request fails
  take,         ///< the next tokens, in order
};

/// `current_decode_node` is the worker the request is on (empty while it is being moved);
/// `received` the number of tokens taken so far.
inline token_verdict classify_tokens(std::string_view current_decode_node, uint32_t received,
                                     std::string_view event_decode_node, uint32_t event_index,
                                     bool event_has_error) {
  if (!event_decode_node.empty() && event_decode_node != current_decode_node)
    return token_verdict::stale_worker;
  if (event_index < received)
    return token_verdict::duplicate;
  if (event_index > received)
    return token_verdict::gap;
  return event_has_error ? token_verdict::failed : token_verdict::take;
}

/// After a prefill attempt failed: try again in the decode worker's cluster, or give up.
/// Resumes start prefills too, and do not count as failed attempts.
enum class failover_verdict { retry_locally, give_up_overloaded, give_up };

inline failover_verdict after_prefill_failure(uint32_t attempts, uint32_t resumes,
                                              uint32_t max_attempts, bool overloaded) {
  if (attempts - resumes < max_attempts)
    return failover_verdict::retry_locally;
  return overloaded ? failover_verdict::give_up_overloaded : failover_verdict::give_up;
}

/// After its decode worker was lost: another one continues it, at most `max_resumes` times.
inline bool may_resume(uint32_t resumes, uint32_t max_resumes) {
  return resumes < max_resumes;
}

/// States in which the request's decode worker holds it (a reservation, a KV transfer on
/// its way or in, a stream).
inline bool waits_on_decode(request_state s) {
  return s == request_state::prefilling || s == request_state::transferring ||
         s == request_state::decoding;
}

/// What a node going down means for a live request.
enum class node_loss {
  none,
  resume,   ///< it was its decode worker's node: continue on another decode worker
  failover, ///< it was its prefill worker's node and the KV is not in: prefill elsewhere now
};

inline node_loss on_node_down(request_state s, std::string_view decode_node,
                              std::string_view prefill_node, std::string_view down) {
  if (s == request_state::done || s == request_state::failed)
    return node_loss::none;
  if (decode_node == down)
    return node_loss::resume;
  if (prefill_node == down && (s == request_state::prefilling || s == request_state::transferring))
    return node_loss::failover;
  return node_loss::none;
}

/// What the periodic sweep does with a live request, most urgent first.
enum class sweep_verdict {
  none,
  abandoned,   ///< the client went away: 499
  deadline,    ///< past its deadline: 504
  check_stall, ///< its decode worker has been silent for stall_timeout: ask it
};

struct sweep_input {
  bool client_gone = false;
  std::chrono::steady_clock::time_point now, deadline, last_event;
  std::chrono::nanoseconds stall_timeout{0}; ///< 0: never
  request_state state = request_state::accepted;
  bool status_asked = false; ///< a status query is out already
};

inline sweep_verdict sweep(const sweep_input& in) {
  if (in.client_gone)
    return sweep_verdict::abandoned;
  if (in.now >= in.deadline)
    return sweep_verdict::deadline;
  if (in.stall_timeout.count() > 0 && waits_on_decode(in.state) && !in.status_asked &&
      in.now - in.last_event >= in.stall_timeout)
    return sweep_verdict::check_stall;
  return sweep_verdict::none;
}

} // namespace prfaas::serving::rules

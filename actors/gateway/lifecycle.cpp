#include "gateway/lifecycle.hpp"

namespace prfaas::serving {

const char* to_string(request_state s) {
  switch (s) {
  case request_state::accepted:
    return "accepted";
  case request_state::routed:
    return "routed";
  case request_state::prefilling:
    return "prefilling";
  case request_state::transferring:
    return "transferring";
  case request_state::decoding:
    return "decoding";
  case request_state::done:
    return "done";
  case request_state::failed:
    return "failed";
  }
  return "?";
}

bool lifecycle::allowed(request_state from, request_state to) {
  using s = request_state;
  if (from == s::done || from == s::failed)
    return false;
  if (to == s::failed)
    return true;
  switch (from) {
  case s::accepted:
    return to == s::routed;
  case s::routed:
    return to == s::prefilling || to == s::decoding; // late KV of an earlier attempt
  case s::prefilling:
    return to == s::transferring || to == s::decoding || to == s::routed;
  case s::transferring:
    return to == s::decoding || to == s::routed;
  case s::decoding:
    return to == s::done || to == s::routed; // resume: the decode node died
  default:
    return false;
  }
}

bool lifecycle::advance(request_state next) {
  if (!allowed(state_, next))
    return false;
  if (next == request_state::prefilling)
    ++attempts_;
  state_ = next;
  return true;
}

} // namespace prfaas::serving

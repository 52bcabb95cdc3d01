#pragma once

// The gateway's request tracker: every live request's state machine, as plain C++ with
// no actor system, no network and no clock of its own. Events go in (a request was
// accepted, the scheduler answered, a prefill failed, token events arrived, a node went
// down, the periodic sweep at time `now`...), and actions come out (ask the scheduler
// for a route, order the decode reservation and the prefill, cancel work, ask a decode
// worker for a request's status, stream output, end the request). It decides, with the
// rules of request_rules.hpp and the edges of lifecycle.hpp, everything about routing,
// failover, resume, token gaps, stalls and deadlines; gateway.cpp and gateway_env.cpp
// are the protocol glue that turns actions into messages, metrics and logs, and replies
// into events.
//
// Every accepted request ends in exactly one `failed` or `finished` action, and its
// output never repeats or skips a token (tests/unit/gateway/test_request_tracker.cpp
// checks both over random event orders).
//
// Replies name the entry they answer (an `entry_ptr` carried by the action that asked)
// and, where a request may have moved on since, the node or transfer they came from:
// a late reply for an earlier attempt is dropped here, not in the glue.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gateway/http_frontend.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/openai.hpp"
#include "gateway/output_text.hpp"
#include "prfaas/messages/gateway.hpp"
#include "prfaas/messages/scheduler.hpp"
#include "prfaas/runtime/errors.hpp"

namespace prfaas::serving::gateway_detail {

using clock_type = std::chrono::steady_clock;

inline double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct entry {
  std::shared_ptr<accepted_request> a;
  lifecycle lc;
  clock_type::time_point deadline;
  clock_type::time_point first_token_at{};
  RouteDecision route;
  std::vector<std::string> failed_prefill;
  uint64_t transfer_id = 0;
  uint32_t received = 0;
  std::vector<token> tokens;
  uint64_t engine_prefill_ns = 0;
  uint64_t exposed_wire_ns = 0;
  uint64_t prefill_queue_ns = 0;
  uint32_t retransmits = 0;
  std::string decode_node;
  uint32_t computed_tokens = 0; ///< prompt tokens the prefill computed (rest: prefix cache)
  std::vector<std::string> failed_decode; ///< decode nodes lost while serving it
  uint32_t resumes = 0;
  std::vector<token> resumed_after;    ///< tokens delivered before the last resume
  std::unique_ptr<output_text> text;   ///< detokenizer and stop strings of the output
  clock_type::time_point last_event{}; ///< routed, or the last token event taken
  bool status_asked = false;           ///< a DecodeStatusQuery is out for this silence
  /// The last prefill attempt failed in its KV transfer (errc::transfer_failed): the
  /// prefill→decode path is suspect, not only the prefill worker.
  bool transfer_failed = false;
};
using entry_ptr = std::shared_ptr<entry>;

/// A step that failed, as the tracker needs it: its kind and a text for the client and
/// the log (the glue's `error_code` and `describe` of the error it got).
struct step_error {
  errc code = errc::none;
  std::string text;
};

/// What the glue does for the tracker, in the order the tracker returns them.
namespace act {
/// Ask the scheduler for a route (failover: a local prefill worker for the same
/// decode worker, excluding `failed_prefill`). Answer: routed() or route_failed().
struct ask_route {
  entry_ptr e;
  bool failover = false;
};
/// Reserve the decode slot at `e->route`'s decode worker. Failure: reserve_failed().
struct order_decode {
  entry_ptr e;
};
/// Order the prefill (transfer `e->transfer_id`) at `e->route`'s prefill worker.
/// Answer: prefill_done() or prefill_failed(), with that transfer id.
struct order_prefill {
  entry_ptr e;
};
/// Cancel the request's work at one worker (transfer_id 0: all of it).
struct cancel {
  enum class role : uint8_t { decode, prefill };
  entry_ptr e;
  role at = role::decode;
  std::string node, actor;
  uint64_t transfer_id = 0;
  std::string reason;
};
/// Ask the decode worker on `node` whether it still has the request. Answer: status().
struct ask_status {
  entry_ptr e;
  std::string node;
};
/// New output for the client.
struct output {
  entry_ptr e;
  output_delta delta;
};
/// A rare path taken (probe, counter, log line): `node` is the worker it concerns.
struct note {
  enum class kind : uint8_t {
    prefill_failover,
    decode_switch,
    decode_resume,
    token_gap,
    stall_resume,
    deadline
  };
  entry_ptr e;
  kind what;
  std::string node, text;
};
/// The request ended with an error (it has left the tracker).
struct failed {
  entry_ptr e;
  api_error err;
  std::string outcome;
};
/// The request ended with its output complete (it has left the tracker).
struct finished {
  entry_ptr e;
  std::string reason;
};
} // namespace act

using action = std::variant<act::ask_route, act::order_decode, act::order_prefill, act::cancel,
                            act::ask_status, act::output, act::note, act::failed, act::finished>;
using actions = std::vector<action>;

struct tracker_settings {
  uint32_t max_attempts = 2;
  uint32_t max_resumes = 2;
  std::chrono::nanoseconds stall_timeout{0}; ///< 0: never ask a silent decode worker
  std::chrono::nanoseconds deadline{0};      ///< per request, from acceptance
  std::string deadline_text;                 ///< the deadline as the client is told it
};

class request_tracker {
public:
  /// `new_transfer_id`: a fresh id per prefill attempt, unique across nodes.
  request_tracker(tracker_settings s, std::function<uint64_t()> new_transfer_id)
      : cfg_(std::move(s)), new_id_(std::move(new_transfer_id)) {}

  const tracker_settings& settings() const { return cfg_; }
  size_t size() const { return live_.size(); }
  entry_ptr find(const std::string& id) const;

  /// A request was accepted (its output text set up); it is routed at once.
  actions accept(std::shared_ptr<accepted_request> a, std::unique_ptr<output_text> text);

  /// The scheduler's answer to an ask_route.
  actions routed(const entry_ptr& e, RouteDecision d, bool failover, clock_type::time_point now);
  actions route_failed(const entry_ptr& e, const step_error& err, bool failover,
                       clock_type::time_point now);
  /// The decode worker on `node` refused or did not take the reservation.
  actions reserve_failed(const entry_ptr& e, const std::string& node, const step_error& err,
                         clock_type::time_point now);
  /// The prefill worker's answer for transfer `tid`.
  actions prefill_done(const entry_ptr& e, uint64_t tid, uint32_t retransmits, uint64_t queue_ns);
  actions prefill_failed(const entry_ptr& e, uint64_t tid, const step_error& err,
                         clock_type::time_point now);
  /// The decode worker on `node` answered a status query (known: it has the request),
  /// or did not answer (`err`).
  actions status(const entry_ptr& e, const std::string& node, bool known,
                 clock_type::time_point now);
  actions status_failed(const entry_ptr& e, const std::string& node, const step_error& err,
                        clock_type::time_point now);

  actions tokens(const TokenEvent& ev, clock_type::time_point now);
  /// A node is down: its decode work resumes elsewhere, and its prefill work (not yet
  /// decoding) fails over at once rather than when the order's reply times out — its
  /// reply may never come, or may have come before the KV was delivered.
  actions peer_down(const std::string& node, clock_type::time_point now);
  /// The periodic look at every request: a gone client, a deadline, a silent worker.
  actions sweep(clock_type::time_point now);

private:
  void fail(const entry_ptr& e, api_error err, const char* outcome, actions& out);
  void finish(const entry_ptr& e, const std::string& reason, actions& out);
  bool past_deadline(const entry_ptr& e, clock_type::time_point now, actions& out);
  void fail_deadline(const entry_ptr& e, actions& out);
  void failover(const entry_ptr& e, const step_error& err, clock_type::time_point now,
                actions& out);
  bool switch_decode(const entry_ptr& e, const step_error& no_route, actions& out);
  void resume(const entry_ptr& e, const std::string& why, clock_type::time_point now, actions& out);
  void stalled(const entry_ptr& e, const std::string& why, clock_type::time_point now,
               actions& out);
  void take_tokens(const entry_ptr& e, const TokenEvent& ev, clock_type::time_point now,
                   actions& out);
  void prefill(const entry_ptr& e, actions& out);
  static act::cancel cancel_decode(const entry_ptr& e, std::string reason);
  static act::cancel cancel_prefill(const entry_ptr& e, std::string reason);

  tracker_settings cfg_;
  std::function<uint64_t()> new_id_;
  std::unordered_map<std::string, entry_ptr> live_;
};

/// What the prefill computes: the prompt, plus the tokens delivered before a resume.
std::vector<token> prefill_prompt(const entry& e);

/// 503 with Retry-After: the service cannot take it now.
api_error unavailable(const std::string& why);

} // namespace prfaas::serving::gateway_detail

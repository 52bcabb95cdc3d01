#pragma once

// The gateway's request tracking: a request's entry (where it stands, what it has
// delivered), the actor's state, and gateway_env — the handlers that route a request,
// reserve its decode slot, order its prefill, take its token events, fail it over,
// resume it elsewhere and sweep deadlines and silences. The decisions they apply are
// request_rules.hpp's; gateway.cpp is the actor around them.

#include <unordered_map>
#include <caf/all.hpp>
#include "common/actor_inbox.hpp"
#include "common/engine_setup.hpp"
#include "common/sampling_wire.hpp"
#include "gateway/gateway_settings.hpp"
#include "gateway/http_frontend.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/request_figures.hpp"
#include "gateway/request_rules.hpp"
#include "gateway/sim_ingress.hpp"
#include "prfaas/engine/block_hash.hpp"
#include "prfaas/runtime/peer_loss.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/messages/decode.hpp"
#include "prfaas/messages/gateway.hpp"
#include "prfaas/messages/prefill.hpp"
#include "prfaas/messages/scheduler.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/runtime/sim_time.hpp"

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

struct gateway_state {
  static inline const char* name = "gateway";
  std::shared_ptr<actor_inbox> inbox;
  std::unique_ptr<http_frontend> http;
  std::unordered_map<std::string, entry_ptr> live;
  prometheus::Gauge* live_gauge = nullptr; ///< live.size()
  std::shared_ptr<std::atomic<uint32_t>> inflight = std::make_shared<std::atomic<uint32_t>>(0);
  std::shared_ptr<std::atomic<uint64_t>> counter = std::make_shared<std::atomic<uint64_t>>(0);

  ~gateway_state() {
    if (http)
      http->stop();
  }
};

using self_ptr = caf::stateful_actor<gateway_state>*;

struct gateway_env {
  self_ptr self;
  node_context* ctx;
  std::string name;
  gateway_settings cfg;
  address me() const { return ctx->local(name); }
  remote_ref<decode_role> decode_of(const entry& e) const {
    return {ctx->msgr(), me(), {e.route.decode_node(), e.route.decode_actor()}};
  }
  remote_ref<prefill_role> prefill_of(const entry& e) const {
    return {ctx->msgr(), me(), {e.route.prefill_node(), e.route.prefill_actor()}};
  }

  duration remaining(const entry& e) const;
  void cancel_decode(const entry& e, const std::string& why) const;
  void cancel_work(const entry& e, const std::string& why) const;
  void end(const entry_ptr& e) const;
  void fail(const entry_ptr& e, api_error err, const char* outcome) const;
  void finish(const entry_ptr& e, const std::string& reason) const;
  static api_error unavailable(const std::string& why);

  /// What the prefill computes: the prompt, plus the tokens delivered before a resume.
  static std::vector<token> prefill_prompt(const entry& e);

  /// The first step, every failover and every resume: ask the scheduler for a route.
  void route(const entry_ptr& e, bool failover) const;
  void reserve_decode(const entry_ptr& e) const;
  void prefill(const entry_ptr& e) const;
  void failover(const entry_ptr& e, const caf::error& err) const;

  /// The node of `e`'s decode worker is gone: continue on another one.
  void resume(const entry_ptr& e, const std::string& why) const;
  /// After a failed KV transfer found no other prefill worker: the same prefill, to
  /// another decode worker (once per failed transfer). False when that does not apply.
  bool switch_decode(const entry_ptr& e, const caf::error& no_route) const;

  /// A node is down: its decode work resumes elsewhere, and its prefill work (not yet
  /// decoding) fails over at once rather than when the order's reply times out — its
  /// reply may never come, or may have come before the KV was delivered.
  void on_peer_down(const std::string& node) const;
  void on_tokens(const TokenEvent& ev) const;
  void sweep() const;

  /// Nothing from its decode worker for stall_timeout (no token yet, or none since the last):
  /// ask the worker whether it still has the request. One that restarted (a crash the node
  /// survived, unseen by the failure detector) has forgotten it, and the request resumes
  /// elsewhere, as when it does not answer; one that has it (waiting for a slot) is left alone.
  void check_stall(const entry_ptr& e) const;
  void stalled(const entry_ptr& e, const std::string& why) const;

  /// The request's deadline passed: 504. Whatever was waiting for it (a prefill
  /// queue, a reply) is what made it late, and that is what the client is told, not
  /// the failure of a step retried with no time left.
  bool past_deadline(const entry_ptr& e) const;
  void fail_deadline(const entry_ptr& e) const;
};

} // namespace prfaas::serving::gateway_detail

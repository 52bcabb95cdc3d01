#pragma once

// The gateway actor's protocol glue around its request tracker (request_tracker.hpp):
// gateway_env turns the tracker's actions into messages (RouteQuery, DecodeOrder,
// PrefillOrder, Cancel, DecodeStatusQuery), output on the client's stream, metrics,
// probes and log lines, and turns every reply into the tracker's next event. What to
// do with a request is decided in the tracker; gateway.cpp is the actor around both.

#include <unordered_map>
#include <caf/all.hpp>
#include "common/actor_inbox.hpp"
#include "common/engine_setup.hpp"
#include "common/sampling_wire.hpp"
#include "gateway/gateway_settings.hpp"
#include "gateway/http_frontend.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/request_figures.hpp"
#include "gateway/request_tracker.hpp"
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

struct gateway_state {
  static inline const char* name = "gateway";
  std::shared_ptr<actor_inbox> inbox;
  std::unique_ptr<http_frontend> http;
  std::unique_ptr<request_tracker> tracker;
  prometheus::Gauge* live_gauge = nullptr; ///< tracker->size()
  std::shared_ptr<std::atomic<uint32_t>> inflight = std::make_shared<std::atomic<uint32_t>>(0);
  std::shared_ptr<std::atomic<uint64_t>> counter = std::make_shared<std::atomic<uint64_t>>(0);

  ~gateway_state() {
    if (http)
      http->stop();
  }
};

using self_ptr = caf::stateful_actor<gateway_state>*;

/// The tracker's settings from the gateway's.
tracker_settings tracker_settings_of(const gateway_settings& cfg);

struct gateway_env {
  self_ptr self;
  node_context* ctx;
  std::string name;
  gateway_settings cfg;
  address me() const { return ctx->local(name); }
  request_tracker& tracker() const { return *self->state.tracker; }
  clock_type::time_point now() const { return self->clock().now(); }
  remote_ref<decode_role> decode_of(const entry& e) const {
    return {ctx->msgr(), me(), {e.route.decode_node(), e.route.decode_actor()}};
  }
  remote_ref<prefill_role> prefill_of(const entry& e) const {
    return {ctx->msgr(), me(), {e.route.prefill_node(), e.route.prefill_actor()}};
  }
  duration remaining(const entry& e) const;

  /// Carries out the tracker's actions, in order.
  void run(actions acts) const;

  // One per action.
  void ask_route(const entry_ptr& e, bool failover) const;
  void order_decode(const entry_ptr& e) const;
  void order_prefill(const entry_ptr& e) const;
  void cancel(const act::cancel& c) const;
  void ask_status(const entry_ptr& e, const std::string& node) const;
  void note(const act::note& n) const;
  void failed(act::failed& f) const;
  void finished(const act::finished& f) const;
  /// The request left the tracker: the gauge and the front end's in-flight count.
  void ended() const;
};

} // namespace prfaas::serving::gateway_detail

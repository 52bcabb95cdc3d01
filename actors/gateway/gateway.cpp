// `gateway`: owns every request's lifecycle, from acceptance at the HTTP front end
// to exactly one outcome (done or failed) — see lifecycle.hpp. The decisions below are
// the request tracker's (request_tracker.hpp: events in, actions out, no actors);
// this actor receives messages and hands them to it, gateway_env.cpp carries out its
// actions.
//
//   accepted      HTTP validated it and admission let it in (http_frontend)
//   routed        the scheduler chose prefill and decode workers (RouteQuery)
//   prefilling    the prefill worker has the order (PrefillOrder); the decode
//                 worker's slot reservation (DecodeOrder) was sent with it
//   transferring  the prefill worker is done computing; the KV is on the wire
//   decoding      the first token arrived (TokenEvent index 0)
//   done / failed
//
// Failover: a PrefillOrder that fails (worker down, transfer failed or timed out,
// worker overloaded) is re-routed once more to a prefill worker in the decode
// worker's own cluster (local prefill), excluding nodes that failed, up to
// `max_attempts` attempts. Every request has a deadline (`request_timeout`); a
// periodic sweep fails the late ones with 504 and cancels their work.
// The client going away cancels the request (outcome "cancelled").
//
// Resume: when the failure detector reports the node of a request's decode worker
// down, the request continues on another decode worker (up to `max_resumes` times):
// a new route that excludes the dead node, a prefill of the prompt plus the tokens
// already delivered, sampling from the next token index, and token numbering that
// continues where the client's stream stands — no repeats, no gaps. Token events from
// a decode worker the request has left are dropped. A gap in a worker's token events
// (one was lost on the way) resumes the same way, after cancelling that worker's copy,
// and so does a request silent for `stall_timeout` (waiting for its first token or
// its next) whose decode worker, asked, no longer has it (it crashed and restarted
// without its node going down).

#include <unordered_map>

#include <caf/all.hpp>

#include "common/actor_inbox.hpp"
#include "common/engine_setup.hpp"
#include "common/sampling_wire.hpp"
#include "gateway/gateway_env.hpp"
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

namespace prfaas::serving {

namespace {

using namespace gateway_detail;

caf::behavior gateway(self_ptr self, node_context* ctx, std::string name, gateway_settings cfg) {
  auto& s = self->state;
  s.inbox = std::make_shared<actor_inbox>(self);
  s.live_gauge = &ctx->node_metrics().gauge("prfaas_gateway_live_requests",
                                            "Requests this gateway holds (accepted, not yet ended)",
                                            {{"gateway", name}});
  s.live_gauge->Set(0);
  gateway_env env{self, ctx, name, cfg};
  http_frontend::hooks hooks;
  s.tracker =
      std::make_unique<request_tracker>(tracker_settings_of(cfg), [ctx] { return ctx->new_id(); });
  auto accept = [self, env](std::shared_ptr<accepted_request> a) {
    if (!a->req.user.empty())
      env.ctx->log()->info("request_accepted request={} prompt_tokens={} {}", a->id,
                           a->req.prompt.size(), a->req.user);
    auto text = std::make_unique<output_text>(env.cfg.tok, a->req.stop, a->req.logprobs >= 0);
    auto acts = env.tracker().accept(std::move(a), std::move(text));
    self->state.live_gauge->Set(static_cast<double>(env.tracker().size()));
    env.run(std::move(acts));
  };
  hooks.submit = [inbox = s.inbox, accept](std::shared_ptr<accepted_request> a) {
    return inbox->post([accept, a] { accept(a); });
  };
  hooks.metrics_text = [ctx] { return ctx->node_metrics().serialize(); };
  hooks.health_json = [ctx, inflight = s.inflight] {
    return "{\"status\":\"ok\",\"node\":\"" + ctx->node() +
           "\",\"in_flight\":" + std::to_string(inflight->load()) + "}";
  };
  hooks.next_id = [node = ctx->node(), inc = ctx->incarnation(), counter = s.counter] {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s-%06llx-%llu", node.c_str(),
                  static_cast<unsigned long long>(inc & 0xffffff),
                  static_cast<unsigned long long>(counter->fetch_add(1) + 1));
    return std::string{buf};
  };
  // The outcome series exist from the start (at zero), as Prometheus prefers.
  for (const char* outcome : {"ok", "overloaded", "unavailable", "no_route", "prefill_failed",
                              "decode_failed", "lost_tokens", "deadline", "cancelled", "internal"})
    count_outcome(ctx->node_metrics(), {}, outcome, -1);
  // In virtual time there is no HTTP (sockets and threads): clients use sim_ingress.hpp.
  if (!virtual_time(ctx->system())) {
    s.http = std::make_unique<http_frontend>(cfg.http, cfg.limits, hooks, ctx->log(), s.inflight,
                                             cfg.tok);
    s.http->start();
    ctx->node_metrics()
        .gauge("prfaas_gateway_port", "TCP port of the gateway's HTTP front end",
               {{"gateway", name}})
        .Set(s.http->port());
  }
  self->send(self, caf::tick_atom_v);
  auto lost = [=](const std::string& peer, const std::string&) {
    env.run(env.tracker().peer_down(peer, env.now()));
  };
  return on_peer_lost(self, *ctx, lost)
      .or_else(caf::behavior{
          [=](wake_atom) { self->state.inbox->drain(); },
          [=](sim_submit& m) {
            self->state.inflight->fetch_add(1);
            accept(std::move(m.request));
          },
          [=](caf::tick_atom) {
            env.run(env.tracker().sweep(env.now()));
            self->delayed_send(self, env.cfg.sweep_interval, caf::tick_atom_v);
          },
          [=](remote_message& msg) -> caf::result<remote_message> {
            return dispatch<gateway_role>(
                *ctx, msg,
                [&](TokenEvents& batch) {
                  for (auto& ev : batch.events())
                    env.run(env.tracker().tokens(ev, env.now()));
                },
                [&](TokenEvent& ev) { env.run(env.tracker().tokens(ev, env.now())); });
          },
      });
}

void register_types(actor_registry& r) {
  r.add({.name = "gateway",
         .doc = "OpenAI-compatible HTTP front end; owns each request's lifecycle",
         .params = gateway_params(),
         .factory =
             [](node_context& ctx, const std::string& name, const actor_params& p) {
               return ctx.system().spawn(gateway, &ctx, name, settings_of(ctx, name, p));
             },
         .check = check_gateway_params,
         .check_deployment = [](const std::string&, const actor_params&,
                                const deployment_config& dep) { read_model(dep); }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

// Its rare paths (a chaos run shows which it took) and its fault points.
PRFAAS_REGISTER_PROBES(
    gateway,
    {"gateway.prefill_failover", "a prefill attempt failed (worker or node lost, transfer failed) "
                                 "and the request is re-routed"},
    {"gateway.decode_resume",
     "a request's decode node went down and the request continues on another decode worker"},
    {"gateway.token_gap", "tokens went missing between a decode worker and the gateway; the "
                          "request resumes after the last one delivered"},
    {"gateway.stall_resume",
     "a decoding request was silent past stall_timeout and its decode worker no longer had it (it "
     "restarted); the request resumes elsewhere"},
    {"gateway.deadline", "a request reached its deadline and ended with 504"})

} // namespace prfaas::serving

// `scheduler`: decides, per request, which prefill worker and which decode worker
// serve it (serving.RouteQuery → serving.RouteDecision). The decision is its
// routing_policy's (chosen by name); the actor keeps the policy's view current:
//  * the workers, from the deployment file (actors of type prefill_worker and
//    decode_worker; a worker in a prefill-only cluster is a PrfaaS worker);
//  * liveness, from the node's failure detector (membership events);
//  * load, polled with serving.LoadQuery every `load_interval`, plus what it routed
//    since the last answer, so a burst between two polls is still spread.
// Exposes prfaas_scheduler_routes_total{route} and _no_route_total.

#include <caf/all.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/serving.pb.h"
#include "scheduler/policy.hpp"

namespace prfaas::serving {

namespace {

struct scheduler_state {
  static inline const char* name = "scheduler";
  std::unique_ptr<routing_policy> policy;
  cluster_view view;
};

cluster_view workers_of(const deployment_config& dep) {
  cluster_view v;
  for (auto& n : dep.nodes) {
    bool prfaas = false;
    if (auto it = dep.clusters.find(n.cluster); it != dep.clusters.end())
      prfaas = it->second.kind == "prefill-only";
    for (auto& a : n.actors) {
      worker_view w{.addr = {n.name, a.name}, .cluster = n.cluster, .prfaas = prfaas};
      if (a.type == "prefill_worker")
        v.prefill.push_back(w);
      else if (a.type == "decode_worker" && !prfaas)
        v.decode.push_back(w);
    }
  }
  return v;
}

void apply_load(worker_view& w, const WorkerLoad& l) {
  w.queue = l.queue_depth();
  w.active = l.active();
  w.capacity = std::max<uint32_t>(1, l.capacity());
  w.queued_tokens = l.queued_tokens();
  w.assigned = 0;
  w.assigned_tokens = 0;
}

caf::behavior scheduler(caf::stateful_actor<scheduler_state>* self, node_context* ctx,
                        std::string self_name, actor_params params) {
  auto policy_name = params.str("policy");
  self->state.policy = policy_registry::instance().make(policy_name, params);
  self->state.view = workers_of(ctx->deployment());
  const auto interval = params.dur("load_interval");
  const auto me = ctx->local(self_name);
  auto& m = ctx->node_metrics();
  auto* no_route = &m.counter("prfaas_scheduler_no_route_total", "Route queries with no worker to serve them");
  self->send(ctx->transport(), caf::subscribe_atom_v, caf::actor_cast<caf::actor>(self));
  self->send(self, caf::tick_atom_v);
  ctx->log()->info("scheduler_started policy={} prefill_workers={} decode_workers={}",
                   policy_name, self->state.view.prefill.size(), self->state.view.decode.size());

  auto poll = [self, ctx, me, interval](bool prefill, size_t i) {
    auto& list = prefill ? self->state.view.prefill : self->state.view.decode;
    request_remote(self, *ctx, make_remote(me, list[i].addr, LoadQuery{}), interval * 5)
      .then(
        [self, prefill, i](remote_message& r) {
          WorkerLoad l;
          if (parse_remote(r, l))
            apply_load((prefill ? self->state.view.prefill : self->state.view.decode)[i], l);
        },
        [](caf::error&) {}); // stale load is kept; liveness comes from membership
  };

  return {
    [=](caf::tick_atom) {
      for (size_t i = 0; i < self->state.view.prefill.size(); ++i)
        if (self->state.view.prefill[i].up)
          poll(true, i);
      for (size_t i = 0; i < self->state.view.decode.size(); ++i)
        if (self->state.view.decode[i].up)
          poll(false, i);
      self->delayed_send(self, interval, caf::tick_atom_v);
    },
    [=](const membership_event& e) {
      bool up = e.state != peer_state::down;
      for (auto* list : {&self->state.view.prefill, &self->state.view.decode})
        for (auto& w : *list)
          if (w.addr.node == e.peer)
            w.up = up;
    },
    [=](remote_message& msg) -> caf::result<remote_message> {
      RouteQuery q;
      if (!parse_remote(msg, q))
        return unknown_type(*ctx, msg);
      route_input in;
      in.prompt_tokens = q.prompt_tokens();
      in.block_ids = {q.block_ids().data(), static_cast<size_t>(q.block_ids_size())};
      in.exclude_nodes.assign(q.exclude_nodes().begin(), q.exclude_nodes().end());
      in.local_only = q.local_only();
      in.decode_node = q.decode_node();
      in.decode_actor = q.decode_actor();
      auto& v = self->state.view;
      auto c = self->state.policy->decide(in, v);
      if (c.prefill < 0 || c.decode < 0) {
        no_route->Increment();
        return make_error(errc::overloaded, "no route for request " + q.request_id() + ": " +
                                                c.why_not);
      }
      auto& p = v.prefill[c.prefill];
      auto& d = v.decode[c.decode];
      p.assigned += 1;
      p.assigned_tokens += q.prompt_tokens();
      d.assigned += 1;
      ctx->node_metrics()
        .counter("prfaas_scheduler_routes_total", "Requests routed, by route", {{"route", c.route}})
        .Increment();
      RouteDecision out;
      out.set_prefill_node(p.addr.node);
      out.set_prefill_actor(p.addr.actor);
      out.set_decode_node(d.addr.node);
      out.set_decode_actor(d.addr.actor);
      out.set_route(c.route);
      out.set_uncached_tokens(c.uncached_tokens);
      out.set_threshold(c.threshold);
      out.set_policy(self->state.policy->name());
      return make_reply(msg, out);
    },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "scheduler",
         .doc = "routes each request to a prefill worker and a decode worker (policy by name)",
         .params = {{"policy", param_kind::string, "threshold", "routing policy by name"},
                    {"threshold", param_kind::integer, "4096",
                     "policy threshold: offload prompts longer than this many uncached tokens"},
                    {"load_interval", param_kind::duration, "100ms", "how often workers' load is polled"}},
         .factory = [](node_context& ctx, const std::string& name, const actor_params& p) {
           return ctx.system().spawn(scheduler, &ctx, name, p);
         },
         .check = [](const std::string& path, const actor_params& p) {
           auto names = policy_registry::instance().names();
           if (!policy_registry::instance().make(p.str("policy"), p)) {
             std::string list;
             for (auto& n : names)
               list += (list.empty() ? "" : ", ") + n;
             throw config_error(path + ".policy", "unknown routing policy \"" + p.str("policy") +
                                                      "\" (registered: " + list + ")");
           }
           if (p.integer("threshold") < 0)
             throw config_error(path + ".threshold", "must not be negative");
         }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::serving

// `scheduler`: decides, per request, which prefill worker and which decode worker
// serve it (serving.RouteQuery → serving.RouteDecision). The decision is its
// routing_policy's (chosen by name); the actor keeps the policy's view current:
//  * the workers, from the deployment file (actors of type prefill_worker and
//    decode_worker; a worker in a prefill-only cluster is a PrfaaS worker);
//  * liveness, from the node's failure detector (membership events);
//  * load, polled with serving.LoadQuery every `load_interval`, plus what it routed
//    since the last answer, so a burst between two polls is still spread.
//  * link state, from link monitors that list it among their `subscribers`: while a
//    cross-cluster link is down, nothing is offloaded across it.
// Exposes prfaas_scheduler_routes_total{route}, _no_route_total and _link_up.

#include <algorithm>
#include <set>
#include <sstream>

#include <caf/all.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/remote.hpp"
#include "common/engine_setup.hpp"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/link.pb.h"
#include "prfaas/wire/serving.pb.h"
#include "scheduler/policy.hpp"

namespace prfaas::serving {

namespace {

struct scheduler_state {
  static inline const char* name = "scheduler";
  std::unique_ptr<routing_policy> policy;
  cluster_view view;
  std::set<std::string> link_down; ///< links ("cluster|peer") a monitor reports down
};

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in{text};
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

bool listed(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

/// The deployment's workers: actors whose type is one of `prefill_types` /
/// `decode_types` (plugin worker types join by being listed there).
cluster_view workers_of(const deployment_config& dep, const std::vector<std::string>& prefill_types,
                        const std::vector<std::string>& decode_types) {
  cluster_view v;
  for (auto& n : dep.nodes) {
    bool prfaas = false;
    if (auto it = dep.clusters.find(n.cluster); it != dep.clusters.end())
      prfaas = it->second.kind == "prefill-only";
    for (auto& a : n.actors) {
      worker_view w{.addr = {n.name, a.name}, .cluster = n.cluster, .prfaas = prfaas};
      if (listed(prefill_types, a.type))
        v.prefill.push_back(w);
      else if (listed(decode_types, a.type) && !prfaas)
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
  self->state.view = workers_of(ctx->deployment(), split_names(params.str("prefill_types")),
                                split_names(params.str("decode_types")));
  const auto interval = params.dur("load_interval");
  const auto me = ctx->local(self_name);
  auto& m = ctx->node_metrics();
  auto* no_route = &m.counter("prfaas_scheduler_no_route_total", "Route queries with no worker to serve them");
  auto* link_up = &m.gauge("prfaas_scheduler_link_up",
                           "1 while no cross-cluster link is reported down (offload allowed)");
  link_up->Set(1);
  address dir;
  if (auto d = params.str("directory"); !d.empty() && !address::parse(d, dir))
    dir = ctx->local(d);
  const auto dir_timeout = params.dur("directory_timeout");
  const uint32_t block_tokens = read_model(ctx->deployment()).block_tokens;
  auto* cache_blind = &m.counter("prfaas_scheduler_cache_blind_total",
                                 "Routes decided without the KV directory's answer");
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

  // One routing decision: the policy's choice, booked against the workers' load.
  auto decide = [=](const RouteQuery& q, const remote_message& msg,
                    std::map<std::string, uint32_t> cached) -> caf::expected<remote_message> {
    route_input in;
    in.cached_by_node = std::move(cached);
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
      if (link::LinkState st; parse_remote(msg, st)) {
        // Link down: no new offloads (the threshold is effectively infinite) until a
        // monitor reports it back. Unknown (nothing measured yet) counts as up.
        auto key = st.cluster() + "|" + st.peer_cluster();
        auto& links = self->state.link_down;
        bool was_up = links.empty();
        if (st.state() == link::LINK_DOWN)
          links.insert(key);
        else
          links.erase(key);
        self->state.view.link_up = links.empty();
        // PrfaaS egress is measured by the monitor on the prefill-only side.
        if (auto c = ctx->deployment().clusters.find(st.cluster());
            c != ctx->deployment().clusters.end() && c->second.kind == "prefill-only")
          self->state.view.link_utilisation = st.utilisation();
        link_up->Set(links.empty() ? 1 : 0);
        if (was_up != links.empty())
          ctx->log()->warn("scheduler_link_{} link={}-{} reason=\"{}\"", links.empty() ? "up" : "down",
                           st.cluster(), st.peer_cluster(), st.reason());
        return remote_message{};
      }
      RouteQuery q;
      if (!parse_remote(msg, q))
        return unknown_type(*ctx, msg);
      if (dir.node.empty() || q.block_ids_size() == 0) {
        auto r = decide(q, msg, {});
        if (!r)
          return std::move(r.error());
        return std::move(*r);
      }
      // Ask the KV directory where the prompt's prefix is cached; without an answer in
      // time (or while it rebuilds) route cache-blind rather than wait or fail.
      auto rp = self->make_response_promise<remote_message>();
      directory::PrefixQuery pq;
      *pq.mutable_block_ids() = q.block_ids();
      pq.set_request_id(q.request_id());
      request_remote(self, *ctx, make_remote(me, dir, pq), dir_timeout)
        .then(
          [=](remote_message& r) mutable {
            directory::PrefixMatch m;
            std::map<std::string, uint32_t> cached;
            if (parse_remote(r, m) && !m.rebuilding())
              for (auto& n : m.nodes())
                cached[n.node() + "/" + n.actor()] = n.matched_blocks() * block_tokens;
            else
              cache_blind->Increment();
            auto d = decide(q, msg, std::move(cached));
            if (d)
              rp.deliver(std::move(*d));
            else
              rp.deliver(std::move(d.error()));
          },
          [=](caf::error&) mutable {
            cache_blind->Increment();
            auto d = decide(q, msg, {});
            if (d)
              rp.deliver(std::move(*d));
            else
              rp.deliver(std::move(d.error()));
          });
      return rp;
    },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "scheduler",
         .doc = "routes each request to a prefill worker and a decode worker (policy by name)",
         .params = {{"policy", param_kind::string, "threshold", "routing policy by name"},
                    {"threshold", param_kind::integer, "4096",
                     "policy threshold: offload prompts longer than this many uncached tokens"},
                    {"load_interval", param_kind::duration, "100ms", "how often workers' load is polled"},
                    {"scarce_utilisation", param_kind::number, "0.85",
                     "prfaas policy: link utilisation at which bandwidth becomes scarce"},
                    {"abundant_utilisation", param_kind::number, "0.6",
                     "prfaas policy: ... and abundant again (with the queue below its bound)"},
                    {"scarce_queue_tokens", param_kind::integer, "524288",
                     "prfaas policy: PrfaaS prefill queue (tokens) at which bandwidth is scarce"},
                    {"abundant_queue_tokens", param_kind::integer, "131072",
                     "prfaas policy: ... and abundant again"},
                    {"load_weight", param_kind::number, "1.0",
                     "cache-aware placement: cost of one pending token against one uncached token"},
                    {"directory", param_kind::string, "\"\"",
                     "KV directory to ask for prefix matches (node/actor or a local name); empty = cache-blind"},
                    {"directory_timeout", param_kind::duration, "20ms",
                     "how long a route waits for the directory before going cache-blind"},
                    {"prefill_types", param_kind::string, "prefill_worker",
                     "actor types that are prefill workers (comma-separated)"},
                    {"decode_types", param_kind::string, "decode_worker",
                     "actor types that are decode workers (comma-separated)"}},
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

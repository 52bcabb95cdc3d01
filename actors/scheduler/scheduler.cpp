// `scheduler`: decides, per request, which prefill worker and which decode worker
// serve it (serving.RouteQuery → serving.RouteDecision). The decision is its
// routing_policy's (chosen by name); the actor keeps the policy's view current:
//  * the workers, from the deployment file (actors of type prefill_worker and
//    decode_worker; a worker in a prefill-only cluster is a PrfaaS worker);
//  * liveness, from the node's failure detector (membership events);
//  * load, polled with serving.LoadQuery every `load_interval`, plus what it routed
//    that the answer may not include yet (routed after the poll, less `route_grace`:
//    the order may still be on its way from the gateway), so a burst between two
//    polls is still spread and a just-chosen worker never looks idle.
//  * link state, from link monitors that list it among their `subscribers`: while a
//    cross-cluster link is down, nothing is offloaded across it; the PrfaaS side's
//    utilisation, throughput and backlog drive the prfaas policy's bandwidth mode
//    and its short-term threshold controller. With several PD or PrfaaS clusters, its
//    own cluster's workers and each linked PrfaaS cluster over its own link
//    (link_book.hpp).
// Exposes prfaas_scheduler_routes_total{route}, _placements_total{basis,route},
// _no_route_total, _link_up, _threshold_tokens, _planned_threshold_tokens,
// _bandwidth_scarce and _threshold_changes_total{reason}; with several links also
// _cluster_link_up, _cluster_link_over_budget, _cluster_link_utilisation,
// _cluster_link_queue_seconds{pd_cluster,prfaas_cluster} and
// _cluster_routes_total{prfaas_cluster}.

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/messages/decode.hpp"
#include "prfaas/messages/kv_directory.hpp"
#include "prfaas/messages/prefill.hpp"
#include "prfaas/messages/scheduler.hpp"
#include "prfaas/runtime/role.hpp"
#include "common/actor_inbox.hpp"
#include "common/engine_setup.hpp"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/link.pb.h"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/scheduler.pb.h"
#include "scheduler/link_book.hpp"
#include "scheduler/long_term.hpp"
#include "scheduler/policy.hpp"
#include "scheduler/scheduler_params.hpp"

namespace prfaas::serving {

namespace {

struct scheduler_state {
  static inline const char* name = "scheduler";
  std::unique_ptr<routing_policy> policy;
  cluster_view view;
  std::optional<link_book> links;     ///< which workers, and each link's state
  std::optional<long_term> control;   ///< re-planning and P/D conversion (both optional)
  std::shared_ptr<actor_inbox> inbox; ///< the KV size model, once built off the actor's thread
  std::thread kv_builder;             ///< builds it (live); joined when the scheduler ends

  ~scheduler_state() {
    if (kv_builder.joinable())
      kv_builder.join();
  }
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

/// A load report into the view. `own`: this scheduler's cluster; a worker that queues
/// PD clusters by their shares reports the work ahead of each one's next order, and
/// that is what this cluster's orders wait behind.
void apply_load(worker_view& w, const WorkerLoad& l, worker_view::time_point polled,
                std::chrono::nanoseconds grace, const std::string& own) {
  w.queue = l.queue_depth();
  w.active = l.active();
  w.capacity = std::max<uint32_t>(1, l.capacity());
  const auto ahead = l.queued_tokens_ahead().find(own);
  w.queued_tokens = ahead != l.queued_tokens_ahead().end() ? ahead->second : l.queued_tokens();
  w.starting = l.starting();
  if (l.tokens_per_s() > 0)
    w.tokens_per_s = l.tokens_per_s();
  if (l.recent_prefills_size() > 0) {
    w.recent_prefills.clear();
    for (auto& p : l.recent_prefills())
      if (p.tokens() > 0 && p.seconds() > 0 && std::isfinite(p.seconds()))
        w.recent_prefills.emplace_back(p.tokens(), p.seconds());
  }
  w.settle(polled, grace);
  ++w.reports;
}

/// Workers listed in `standby` ("node/actor") start without work: the other role of a
/// convertible node. Throws config_error for a name that is no worker.
void apply_standby(cluster_view& v, const std::vector<std::string>& standby,
                   const std::string& path) {
  for (auto& name : standby) {
    bool found = false;
    for (auto* list : {&v.prefill, &v.decode})
      for (auto& w : *list)
        if (w.addr.to_string() == name) {
          w.enabled = false;
          found = true;
        }
    if (!found)
      throw config_error(path + ".standby", "\"" + name +
                                                "\" is not a prefill or decode worker "
                                                "(node/actor) of this deployment");
  }
}

prometheus::Gauge& threshold_gauge(metrics& m) {
  return m.gauge("prfaas_scheduler_threshold_tokens",
                 "Offload threshold t of the last decision (uncached tokens)");
}

// The prfaas policy's t and bandwidth mode after a decision; a move of t is counted by
// why the controller made it, and logged.
void publish_threshold(metrics& m, spdlog::logger& log, const route_choice& c) {
  auto& t = threshold_gauge(m);
  if (static_cast<uint64_t>(t.Value()) != c.threshold) {
    const std::string why = c.threshold_reason.empty() ? "unknown" : c.threshold_reason;
    m.counter("prfaas_scheduler_threshold_changes_total",
              "Times the short-term controller moved the threshold, by why", {{"reason", why}})
        .Increment();
    log.info("scheduler_threshold old={} new={} mode={} reason={}",
             static_cast<uint64_t>(t.Value()), c.threshold, c.mode, why);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    m.recent().record("threshold", nlohmann::json{{"time", now},
                                                  {"from", static_cast<uint64_t>(t.Value())},
                                                  {"to", c.threshold},
                                                  {"mode", c.mode},
                                                  {"reason", why}}
                                       .dump());
  }
  t.Set(static_cast<double>(c.threshold));
  m.gauge("prfaas_scheduler_bandwidth_scarce",
          "1 while the policy judges PrfaaS egress bandwidth scarce")
      .Set(c.mode == "scarce" ? 1 : 0);
}

// With several links, each one's state as a gauge labelled by its two clusters.
void publish_links(metrics& m, const cluster_view& v, const std::string& own) {
  if (v.links.size() < 2)
    return;
  for (auto& l : v.links) {
    const prometheus::Labels labels{{"pd_cluster", own}, {"prfaas_cluster", l.cluster}};
    m.gauge("prfaas_scheduler_cluster_link_up", "1 while this PrfaaS cluster's link is up", labels)
        .Set(l.up ? 1 : 0);
    m.gauge("prfaas_scheduler_cluster_link_over_budget",
            "1 while this link carries more than its budget (Eq. 2: utilisation plus backlog "
            "drain time over the horizon above 1)",
            labels)
        .Set(l.over_budget(v.link_budget_horizon) ? 1 : 0);
    m.gauge("prfaas_scheduler_cluster_link_utilisation",
            "This link's measured PrfaaS egress over its capacity, as the scheduler routes by it",
            labels)
        .Set(l.utilisation);
    m.gauge("prfaas_scheduler_cluster_link_queue_seconds",
            "This link's backlog drain time (two reports in a row), as the scheduler routes by it",
            labels)
        .Set(l.queue_seconds);
  }
}

// One routed request in the scheduler's counters (with several links, offloads also by
// the PrfaaS cluster they went to).
void count_route(metrics& m, const route_choice& c, const cluster_view& v) {
  m.counter("prfaas_scheduler_routes_total", "Requests routed, by route", {{"route", c.route}})
      .Increment();
  if (v.links.size() >= 2 && v.prefill[c.prefill].prfaas)
    m.counter("prfaas_scheduler_cluster_routes_total",
              "Offloads routed, by the PrfaaS cluster (with several links)",
              {{"prfaas_cluster", v.prefill[c.prefill].cluster}})
        .Increment();
  if (!c.basis.empty())
    m.counter("prfaas_scheduler_placements_total",
              "prfaas policy: prefills placed, by what decided (threshold or cost) and route",
              {{"basis", c.basis}, {"route", c.route}})
        .Increment();
}

using self_ptr = caf::stateful_actor<scheduler_state>*;

/// What the scheduler's handlers share: its actor, node, settings and counters. The
/// actor below is the glue; these are its steps.
struct scheduler_env {
  self_ptr self;
  node_context* ctx;
  address me;
  duration interval{}; ///< load polls (and the controllers' tick)
  duration grace{};    ///< route_grace: what it routed counts until a poll covers it
  address dir;         ///< the KV directory; empty node = routing is cache-blind
  duration dir_timeout{};
  uint32_t block_tokens = 0;
  prometheus::Counter* no_route = nullptr;
  prometheus::Gauge* link_up = nullptr;
  prometheus::Counter* cache_blind = nullptr;

  void build_kv_model() const;
  void poll(bool prefill, size_t i) const;
  void tick() const;
  void on_membership(const membership_event& e) const;
  void on_link_state(const link::LinkState& st) const;
  /// One routing decision: the policy's choice, booked against the workers' load.
  caf::expected<RouteDecision> decide(const RouteQuery& q,
                                      std::map<std::string, uint32_t> cached) const;
  /// Routes `q`, after asking the KV directory where its prefix is cached (if any).
  answer<RouteDecision> route(const RouteQuery& q, remote_message& msg) const;
};

/// The model's KV size per prompt: what an offload ships over the link. Building an
/// engine for it can take seconds (a GGUF: loading, hashing, a probe), which must not
/// stall this node's actor threads: live, it is built on a thread of its own, and until
/// then the threshold stays as configured. In a simulation, here and now.
void scheduler_env::build_kv_model() const {
  self->state.inbox = std::make_shared<actor_inbox>(self);
  auto build = [model = read_model(ctx->deployment()), log = ctx->log(), inbox = self->state.inbox,
                self = self] {
    try {
      std::shared_ptr<engine::engine> e = make_engine(model, "model");
      inbox->post([self, e] {
        self->state.view.kv_bytes = [e](uint64_t tokens) { return e->kv_bytes(tokens); };
      });
    } catch (const std::exception& ex) {
      log->warn("scheduler_no_kv_size reason=\"{}\" (the threshold stays as configured)",
                ex.what());
    }
  };
  if (virtual_time(ctx->system()))
    build();
  else
    self->state.kv_builder = std::thread(build);
}

void scheduler_env::poll(bool prefill, size_t i) const {
  auto& list = prefill ? self->state.view.prefill : self->state.view.decode;
  const auto polled = self->clock().now();
  auto on_load = [self = self, ctx = ctx, prefill, i, polled, grace = grace](WorkerLoad& l) {
    apply_load((prefill ? self->state.view.prefill : self->state.view.decode)[i], l, polled, grace,
               ctx->config().cluster);
  };
  auto on_error = [](caf::error&) {}; // stale load is kept; liveness comes from membership
  if (prefill)
    remote_ref<prefill_role>(ctx->msgr(), me, list[i].addr)
        .request(self, LoadQuery{}, interval * 5)
        .then(on_load, on_error);
  else
    remote_ref<decode_role>(ctx->msgr(), me, list[i].addr)
        .request(self, LoadQuery{}, interval * 5)
        .then(on_load, on_error);
}

void scheduler_env::tick() const {
  auto& v = self->state.view;
  // What routing can use now: up, enabled, engine built (as of the last reports; a
  // worker not heard from yet is not counted, though routing would try it).
  for (bool prefill : {true, false}) {
    size_t n = 0;
    for (auto& w : prefill ? v.prefill : v.decode)
      n += w.routable() && w.reports > 0 ? 1 : 0;
    ctx->node_metrics()
        .gauge("prfaas_scheduler_routable_workers",
               "Workers routing may choose: node up, taking work, engine built (reported)",
               {{"role", prefill ? "prefill" : "decode"}})
        .Set(static_cast<double>(n));
  }
  for (size_t i = 0; i < v.prefill.size(); ++i)
    if (v.prefill[i].up)
      poll(true, i);
  for (size_t i = 0; i < v.decode.size(); ++i)
    if (v.decode[i].up)
      poll(false, i);
  self->state.control->tick(self->clock().now(), v, *self->state.policy, ctx->node_metrics(),
                            *ctx->log());
  self->delayed_send(self, interval, caf::tick_atom_v);
}

void scheduler_env::on_membership(const membership_event& e) const {
  const bool up = e.state != peer_state::down;
  for (auto* list : {&self->state.view.prefill, &self->state.view.decode})
    for (auto& w : *list)
      if (w.addr.node == e.peer)
        w.up = up;
}

void scheduler_env::on_link_state(const link::LinkState& st) const {
  // Link down: no new offloads across it (with one link, the threshold is effectively
  // infinite) until a monitor reports it back. Unknown (nothing measured yet) is up.
  auto& v = self->state.view;
  const bool changed = self->state.links->apply(st, v);
  link_up->Set(v.link_up ? 1 : 0);
  publish_links(ctx->node_metrics(), v, ctx->config().cluster);
  if (changed)
    ctx->log()->warn("scheduler_link_{} link={}-{} reason=\"{}\"", v.link_up ? "up" : "down",
                     st.cluster(), st.peer_cluster(), st.reason());
}

/// The wire form of a choice the policy made for `in`.
RouteDecision decision_of(const route_choice& c, const route_input& in, const cluster_view& v,
                          const std::string& policy, uint32_t block_tokens) {
  auto& p = v.prefill[c.prefill];
  auto& d = v.decode[c.decode];
  RouteDecision out;
  out.set_prefill_node(p.addr.node);
  out.set_prefill_actor(p.addr.actor);
  out.set_decode_node(d.addr.node);
  out.set_decode_actor(d.addr.actor);
  out.set_route(c.route);
  out.set_uncached_tokens(c.uncached_tokens);
  out.set_threshold(c.threshold);
  out.set_policy(policy);
  if (c.move_cache && c.cache_source >= 0) {
    auto& src = v.prefill[c.cache_source];
    out.set_cache_from_node(src.addr.node);
    out.set_cache_from_actor(src.addr.actor);
    out.set_cache_blocks(cached_on(in, src) / std::max<uint32_t>(1, block_tokens));
  }
  return out;
}

caf::expected<RouteDecision> scheduler_env::decide(const RouteQuery& q,
                                                   std::map<std::string, uint32_t> cached) const {
  route_input in;
  in.cached_by_node = std::move(cached);
  in.prompt_tokens = q.prompt_tokens();
  in.block_ids = {q.block_ids().data(), static_cast<size_t>(q.block_ids_size())};
  in.exclude_nodes.assign(q.exclude_nodes().begin(), q.exclude_nodes().end());
  in.local_only = q.local_only();
  in.decode_node = q.decode_node();
  in.decode_actor = q.decode_actor();
  in.exclude_decode_nodes.assign(q.exclude_decode_nodes().begin(), q.exclude_decode_nodes().end());
  auto& v = self->state.view;
  v.now = self->clock().now();
  auto c = self->state.policy->decide(in, v);
  if (!c.mode.empty())
    publish_threshold(ctx->node_metrics(), *ctx->log(), c);
  if (c.prefill < 0 || c.decode < 0) {
    no_route->Increment();
    return make_error(errc::overloaded,
                      "no route for request " + q.request_id() + ": " + c.why_not);
  }
  self->state.control->observe(v.now, c, q.max_output_tokens());
  // Load is the work to do: the uncached tokens, not the prompt (a worker holding a
  // session's prefix must not look busy with its own cache hits).
  const auto now = self->clock().now();
  v.prefill[c.prefill].book(now, c.uncached_tokens > 0 ? c.uncached_tokens : q.prompt_tokens());
  v.decode[c.decode].book(now, 0);
  count_route(ctx->node_metrics(), c, v);
  return decision_of(c, in, v, self->state.policy->name(), block_tokens);
}

answer<RouteDecision> scheduler_env::route(const RouteQuery& q, remote_message& msg) const {
  if (dir.node.empty() || q.block_ids_size() == 0) {
    auto r = decide(q, {});
    if (!r)
      return std::move(r.error());
    return std::move(*r);
  }
  // Ask the KV directory where the prompt's prefix is cached; without an answer in time
  // (or while it rebuilds) route cache-blind rather than wait or fail.
  reply_promise<RouteDecision> rp(self, msg);
  auto deliver = [rp, env = *this, q](std::map<std::string, uint32_t> cached) mutable {
    auto d = env.decide(q, std::move(cached));
    if (d)
      rp.deliver(*d);
    else
      rp.deliver(std::move(d.error()));
  };
  // Routed without knowing the caches: the directory was silent or rebuilding.
  auto blind = [cache_blind = cache_blind, ctx = ctx] {
    cache_blind->Increment();
    ctx->probe("scheduler.cache_blind");
  };
  directory::PrefixQuery pq;
  *pq.mutable_block_ids() = q.block_ids();
  pq.set_request_id(q.request_id());
  remote_ref<kv_directory_role>(ctx->msgr(), me, dir)
      .request(self, pq, dir_timeout)
      .then(
          [blind, deliver, bt = block_tokens](directory::PrefixMatch& m) mutable {
            std::map<std::string, uint32_t> cached;
            if (!m.rebuilding())
              for (auto& n : m.nodes())
                cached[n.node() + "/" + n.actor()] = n.matched_blocks() * bt;
            else
              blind();
            deliver(std::move(cached));
          },
          [blind, deliver](caf::error&) mutable {
            blind();
            deliver({});
          });
  return rp;
}

/// The scheduler's view and controllers from its parameters and the deployment.
void set_up(self_ptr self, node_context* ctx, const std::string& name, const actor_params& params) {
  auto& s = self->state;
  s.policy = policy_registry::instance().make(params.str("policy"), params);
  s.view = workers_of(ctx->deployment(), split_names(params.str("prefill_types")),
                      split_names(params.str("decode_types")));
  s.links.emplace(ctx->deployment(), ctx->config().cluster, s.view);
  if (params.has("backlog_horizon"))
    s.view.link_budget_horizon = params.dur("backlog_horizon");
  apply_standby(s.view, split_names(params.str("standby")), name);
  s.control.emplace(params, ctx->deployment(), s.view, ctx->config().cluster, *ctx->log());
}

scheduler_env env_of(self_ptr self, node_context* ctx, const std::string& name,
                     const actor_params& params) {
  auto& m = ctx->node_metrics();
  scheduler_env env{
      .self = self,
      .ctx = ctx,
      .me = ctx->local(name),
      .interval = params.dur("load_interval"),
      .grace = params.dur("route_grace"),
      .dir = {},
      .dir_timeout = params.dur("directory_timeout"),
      .block_tokens = read_model(ctx->deployment()).block_tokens,
      .no_route = &m.counter("prfaas_scheduler_no_route_total",
                             "Route queries with no worker to serve them"),
      .link_up = &m.gauge("prfaas_scheduler_link_up",
                          "1 while no cross-cluster link is reported down (offload allowed)"),
      .cache_blind = &m.counter("prfaas_scheduler_cache_blind_total",
                                "Routes decided without the KV directory's answer"),
  };
  if (auto d = params.str("directory"); !d.empty() && !address::parse(d, env.dir))
    env.dir = ctx->local(d);
  return env;
}

caf::behavior scheduler(self_ptr self, node_context* ctx, std::string self_name,
                        actor_params params) {
  set_up(self, ctx, self_name, params);
  const auto env = env_of(self, ctx, self_name, params);
  auto& m = ctx->node_metrics();
  env.link_up->Set(1);
  threshold_gauge(m).Set(static_cast<double>(params.integer("threshold")));
  planned_threshold_gauge(m).Set(static_cast<double>(params.integer("threshold")));
  env.build_kv_model();
  self->send(ctx->transport(), caf::subscribe_atom_v, caf::actor_cast<caf::actor>(self));
  self->send(self, caf::tick_atom_v);
  ctx->log()->info("scheduler_started policy={} prefill_workers={} decode_workers={}",
                   params.str("policy"), self->state.view.prefill.size(),
                   self->state.view.decode.size());
  return {
      [=](wake_atom) { self->state.inbox->drain(); },
      [=](caf::tick_atom) { env.tick(); },
      [=](const membership_event& e) { env.on_membership(e); },
      [=](remote_message& msg) -> caf::result<remote_message> {
        return dispatch<scheduler_role>(
            *ctx, msg, [&](link::LinkState& st) { env.on_link_state(st); },
            [&](RouteQuery& q) -> answer<RouteDecision> { return env.route(q, msg); });
      },
  };
}

// A scheduler's parameters, each against its own rule (the policy's are checked by the
// policy when it is made).
void check_params(const std::string& path, const actor_params& p) {
  if (auto o = p.str("offload"); o != "threshold" && o != "cost")
    throw config_error(path + ".offload", "must be threshold or cost, not \"" + o + "\"");
  if (auto o = p.str("link_split"); o != "soonest" && o != "rate")
    throw config_error(path + ".link_split", "must be soonest or rate, not \"" + o + "\"");
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
  if (p.integer("max_threshold") != 0 && p.integer("max_threshold") < p.integer("threshold"))
    throw config_error(path + ".max_threshold", "must not be below threshold (" +
                                                    std::to_string(p.integer("threshold")) + ")");
  if (auto u = p.number("target_utilisation"); !(u > 0 && u <= 1))
    throw config_error(path + ".target_utilisation", "must be in (0, 1]");
  if (p.integer("min_threshold") < 0 || p.integer("min_threshold") > p.integer("threshold"))
    throw config_error(path + ".min_threshold", "must be in [0, threshold (" +
                                                    std::to_string(p.integer("threshold")) + ")]");
  if (auto r = p.number("balance_ratio"); !(r == 0 || r >= 1))
    throw config_error(path + ".balance_ratio", "must be 0 (off) or at least 1");
  if (auto st = p.number("balance_step"); !(st > 1 && st <= 16))
    throw config_error(path + ".balance_step", "must be in (1, 16]");
  long_term::check(path, p);
}

void register_types(actor_registry& r) {
  r.add({.name = "scheduler",
         .doc = "routes each request to a prefill worker and a decode worker (policy by name)",
         .params = scheduler_params(),
         .factory =
             [](node_context& ctx, const std::string& name, const actor_params& p) {
               return ctx.system().spawn(scheduler, &ctx, name, p);
             },
         .check = check_params,
         .check_deployment =
             [](const std::string& path, const actor_params& p, const deployment_config& dep) {
               auto v = workers_of(dep, split_names(p.str("prefill_types")),
                                   split_names(p.str("decode_types")));
               apply_standby(v, split_names(p.str("standby")), path);
               long_term::check_deployment(p, dep, v);
             }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

// Its rare paths (a chaos run shows which it took) and its fault points.
PRFAAS_REGISTER_PROBES(
    scheduler, {"scheduler.cache_blind",
                "the KV directory did not answer; the request is routed without cache knowledge"})

} // namespace prfaas::serving

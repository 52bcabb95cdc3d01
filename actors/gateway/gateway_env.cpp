#include "gateway/gateway_env.hpp"

namespace prfaas::serving::gateway_detail {

namespace {

template <class... Fs> struct overloaded : Fs... { using Fs::operator()...; };
template <class... Fs> overloaded(Fs...) -> overloaded<Fs...>;

step_error step_error_of(const caf::error& err) {
  return {error_code(err), describe(err)};
}

} // namespace

tracker_settings tracker_settings_of(const gateway_settings& cfg) {
  return {.max_attempts = cfg.max_attempts,
          .max_resumes = cfg.max_resumes,
          .stall_timeout = cfg.stall_timeout,
          .deadline = cfg.http.deadline,
          .deadline_text = format_duration(cfg.http.deadline)};
}

duration gateway_env::remaining(const entry& e) const {
  auto left = e.deadline - now();
  return left.count() > 0 ? std::chrono::duration_cast<duration>(left) : duration{1};
}

void gateway_env::run(actions acts) const {
  for (auto& a : acts)
    std::visit(overloaded{[&](act::ask_route& x) { ask_route(x.e, x.failover); },
                          [&](act::order_decode& x) { order_decode(x.e); },
                          [&](act::order_prefill& x) { order_prefill(x.e); },
                          [&](act::cancel& x) { cancel(x); },
                          [&](act::ask_status& x) { ask_status(x.e, x.node); },
                          [&](act::output& x) { x.e->a->channel->push(std::move(x.delta)); },
                          [&](act::note& x) { note(x); }, [&](act::failed& x) { failed(x); },
                          [&](act::finished& x) { finished(x); }},
               a);
}

/// The first step, every failover and every resume: ask the scheduler for a route.
void gateway_env::ask_route(const entry_ptr& e, bool failover) const {
  RouteQuery q;
  const auto prompt = prefill_prompt(*e);
  q.set_request_id(e->a->id);
  q.set_prompt_tokens(static_cast<uint32_t>(prompt.size()));
  q.set_max_output_tokens(e->a->req.max_tokens - static_cast<uint32_t>(e->resumed_after.size()));
  // The prompt's chained block ids, for cache-aware routing (the KV directory).
  for (auto id : engine::block_hasher{cfg.block_tokens}.hash(prompt))
    q.add_block_ids(id);
  for (auto& n : e->failed_decode)
    q.add_exclude_decode_nodes(n);
  if (failover) {
    q.set_local_only(true);
    for (auto& n : e->failed_prefill)
      q.add_exclude_nodes(n);
    q.set_decode_node(e->route.decode_node());
    q.set_decode_actor(e->route.decode_actor());
  }
  auto env = *this;
  remote_ref<scheduler_role>(ctx->msgr(), me(), cfg.scheduler)
      .request(self, q, std::min(cfg.control_timeout, remaining(*e)))
      .then(
          [env, e, failover](RouteDecision& d) {
            env.run(env.tracker().routed(e, std::move(d), failover, env.now()));
          },
          [env, e, failover](caf::error& err) {
            env.run(env.tracker().route_failed(e, step_error_of(err), failover, env.now()));
          });
}

void gateway_env::order_decode(const entry_ptr& e) const {
  DecodeOrder o;
  const auto& r = e->a->req;
  const auto delivered = static_cast<uint32_t>(e->resumed_after.size());
  o.set_request_id(e->a->id);
  auto sampling = r.sampling();
  sampling.first_index = delivered;
  to_wire(sampling, *o.mutable_sampling());
  o.set_max_tokens(r.max_tokens - delivered);
  o.set_first_index(delivered);
  o.set_ignore_eos(r.ignore_eos);
  o.set_gateway_node(ctx->node());
  o.set_gateway_actor(name);
  o.set_budget_ns(static_cast<uint64_t>(remaining(*e).count()));
  auto env = *this;
  decode_of(*e)
      .request(self, o, std::min(cfg.control_timeout, remaining(*e)))
      .then([](DecodeAccepted&) {}, // reserved; the prefill is already on its way
            [env, e, node = e->route.decode_node()](caf::error& err) {
              env.run(env.tracker().reserve_failed(e, node, step_error_of(err), env.now()));
            });
}

void gateway_env::order_prefill(const entry_ptr& e) const {
  const auto& r = e->a->req;
  PrefillOrder o;
  o.set_request_id(e->a->id);
  o.set_transfer_id(e->transfer_id);
  const auto prompt = prefill_prompt(*e);
  o.mutable_prompt()->Reserve(static_cast<int>(prompt.size()));
  for (auto t : prompt)
    o.add_prompt(t);
  auto sampling = r.sampling();
  sampling.first_index = static_cast<uint32_t>(e->resumed_after.size());
  to_wire(sampling, *o.mutable_sampling());
  o.set_decode_node(e->route.decode_node());
  o.set_decode_sink(e->route.decode_actor());
  o.set_budget_ns(static_cast<uint64_t>(remaining(*e).count()));
  o.set_uncached_tokens(e->route.uncached_tokens());
  if (e->resumed_after.empty()) { // (a resume's prompt is longer than what was matched)
    o.set_cache_from_node(e->route.cache_from_node());
    o.set_cache_from_actor(e->route.cache_from_actor());
    o.set_cache_blocks(e->route.cache_blocks());
  }
  auto env = *this;
  const uint64_t tid = e->transfer_id;
  prefill_of(*e)
      .request(self, o, remaining(*e))
      .then(
          [env, e, tid](PrefillDone& d) {
            env.run(env.tracker().prefill_done(e, tid, d.retransmits(), d.queue_ns()));
          },
          [env, e, tid](caf::error& err) {
            env.run(env.tracker().prefill_failed(e, tid, step_error_of(err), env.now()));
          });
}

void gateway_env::cancel(const act::cancel& x) const {
  Cancel c;
  c.set_request_id(x.e->a->id);
  if (x.transfer_id != 0)
    c.set_transfer_id(x.transfer_id);
  c.set_reason(x.reason);
  const address to{x.node, x.actor};
  if (x.at == act::cancel::role::decode)
    remote_ref<decode_role>(ctx->msgr(), me(), to).send(c);
  else
    remote_ref<prefill_role>(ctx->msgr(), me(), to).send(c);
}

/// Nothing from its decode worker for stall_timeout: ask the worker whether it still
/// has the request (the tracker decides on the answer).
void gateway_env::ask_status(const entry_ptr& e, const std::string& node) const {
  DecodeStatusQuery q;
  q.set_request_id(e->a->id);
  auto env = *this;
  decode_of(*e)
      .request(self, q, std::min(cfg.control_timeout, remaining(*e)))
      .then(
          [env, e, node](DecodeStatus& st) {
            env.run(env.tracker().status(e, node, st.known(), env.now()));
          },
          [env, e, node](caf::error& err) {
            env.run(env.tracker().status_failed(e, node, step_error_of(err), env.now()));
          });
}

void gateway_env::note(const act::note& n) const {
  auto& m = ctx->node_metrics();
  const auto& e = *n.e;
  using k = act::note::kind;
  switch (n.what) {
  case k::prefill_failover:
    ctx->probe("gateway.prefill_failover");
    m.counter("prfaas_gateway_failovers_total", "Prefill attempts re-routed to local prefill")
        .Increment();
    ctx->log()->warn("prefill_failover request={} failed_node={} attempt={} reason=\"{}\"", e.a->id,
                     n.node, e.lc.attempts(), n.text);
    break;
  case k::decode_switch:
    m.counter("prfaas_gateway_decode_switches_total",
              "Requests moved to another decode worker after their KV transfer failed")
        .Increment();
    ctx->log()->warn("decode_switch request={} failed_node={} reason=\"{}\"", e.a->id, n.node,
                     n.text);
    break;
  case k::decode_resume:
    ctx->probe("gateway.decode_resume");
    m.counter("prfaas_gateway_decode_resumes_total",
              "Requests moved to another decode worker after theirs was lost")
        .Increment();
    ctx->log()->warn("decode_resume request={} failed_node={} delivered={} resume={} "
                     "reason=\"{}\"",
                     e.a->id, n.node, e.received, e.resumes, n.text);
    break;
  case k::token_gap:
    ctx->probe("gateway.token_gap");
    break;
  case k::stall_resume:
    ctx->probe("gateway.stall_resume");
    break;
  case k::deadline:
    ctx->probe("gateway.deadline");
    break;
  }
}

void gateway_env::ended() const {
  self->state.live_gauge->Set(static_cast<double>(tracker().size()));
  self->state.inflight->fetch_sub(1);
}

void gateway_env::failed(act::failed& f) const {
  const auto& e = f.e;
  ctx->log()->info("request_failed request={} status={} reason=\"{}\" state_attempts={}", e->a->id,
                   f.err.status, f.err.message, e->lc.attempts());
  // Before the client can see the outcome: metrics never lag a response.
  count_outcome(ctx->node_metrics(), e->route.route(), f.outcome,
                seconds_between(e->a->accepted, now()));
  ended();
  e->a->channel->fail(std::move(f.err));
}

void gateway_env::finished(const act::finished& f) const {
  const auto& e = f.e;
  completion_summary s;
  s.id = "cmpl-" + e->a->id;
  s.model = cfg.limits.model;
  s.created = static_cast<int64_t>(std::time(nullptr));
  s.prompt_tokens = static_cast<uint32_t>(e->a->req.prompt.size());
  s.completion_tokens = e->text->tokens();
  s.cached_tokens = static_cast<uint32_t>(
      e->a->req.prompt.size() - std::min<size_t>(e->computed_tokens, e->a->req.prompt.size()));
  s.finish_reason = f.reason;
  request_figures fig{.request_id = e->a->id,
                      .route = e->route.route(),
                      .prefill_node = e->route.prefill_node(),
                      .decode_node = e->route.decode_node(),
                      .attempts = e->lc.attempts(),
                      .retransmits = e->retransmits,
                      .engine_prefill_s = static_cast<double>(e->engine_prefill_ns) / 1e9,
                      .transfer_tail_s = static_cast<double>(e->exposed_wire_ns) / 1e9,
                      .prefill_queue_s = static_cast<double>(e->prefill_queue_ns) / 1e9,
                      .ttft_s = e->first_token_at == clock_type::time_point{}
                                    ? -1
                                    : seconds_between(e->a->accepted, e->first_token_at),
                      .e2e_s = seconds_between(e->a->accepted, now()),
                      .prompt_tokens = s.prompt_tokens,
                      .cached_tokens = s.cached_tokens,
                      .output_tokens = s.completion_tokens};
  s.prfaas = fig.to_json();
  observe_finished(ctx->node_metrics(), fig);
  ended();
  e->a->channel->finish(std::move(s));
}

} // namespace prfaas::serving::gateway_detail

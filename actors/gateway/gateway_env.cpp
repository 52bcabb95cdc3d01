#include "gateway/gateway_env.hpp"

namespace prfaas::serving::gateway_detail {

duration gateway_env::remaining(const entry& e) const {
  auto left = e.deadline - self->clock().now();
  return left.count() > 0 ? std::chrono::duration_cast<duration>(left) : duration{1};
}

void gateway_env::cancel_decode(const entry& e, const std::string& why) const {
  Cancel c;
  c.set_request_id(e.a->id);
  c.set_reason(why);
  decode_of(e).send(c);
}

void gateway_env::cancel_work(const entry& e, const std::string& why) const {
  Cancel c;
  c.set_request_id(e.a->id);
  c.set_reason(why);
  if (!e.route.decode_node().empty())
    decode_of(e).send(c);
  if (!e.route.prefill_node().empty())
    prefill_of(e).send(c);
}

void gateway_env::end(const entry_ptr& e) const {
  self->state.live.erase(e->a->id);
  self->state.live_gauge->Set(static_cast<double>(self->state.live.size()));
  self->state.inflight->fetch_sub(1);
}

void gateway_env::fail(const entry_ptr& e, api_error err, const char* outcome) const {
  if (!e->lc.advance(request_state::failed))
    return;
  ctx->log()->info("request_failed request={} status={} reason=\"{}\" state_attempts={}", e->a->id,
                   err.status, err.message, e->lc.attempts());
  // Before the client can see the outcome: metrics never lag a response.
  count_outcome(ctx->node_metrics(), e->route.route(), outcome,
                seconds_between(e->a->accepted, self->clock().now()));
  cancel_work(*e, outcome);
  end(e);
  e->a->channel->fail(std::move(err));
}

void gateway_env::finish(const entry_ptr& e, const std::string& reason) const {
  if (!e->lc.advance(request_state::done))
    return;
  completion_summary s;
  s.id = "cmpl-" + e->a->id;
  s.model = cfg.limits.model;
  s.created = static_cast<int64_t>(std::time(nullptr));
  s.prompt_tokens = static_cast<uint32_t>(e->a->req.prompt.size());
  s.completion_tokens = e->text->tokens();
  s.cached_tokens = static_cast<uint32_t>(
      e->a->req.prompt.size() - std::min<size_t>(e->computed_tokens, e->a->req.prompt.size()));
  s.finish_reason = reason;
  request_figures f{.request_id = e->a->id,
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
                    .e2e_s = seconds_between(e->a->accepted, self->clock().now()),
                    .prompt_tokens = s.prompt_tokens,
                    .cached_tokens = s.cached_tokens,
                    .output_tokens = s.completion_tokens};
  s.prfaas = f.to_json();
  observe_finished(ctx->node_metrics(), f);
  end(e);
  e->a->channel->finish(std::move(s));
}

api_error gateway_env::unavailable(const std::string& why) {
  return {.status = 503, .message = why, .type = "server_error", .retry_after_s = 1};
}

/// What the prefill computes: the prompt, plus the tokens delivered before a resume.
std::vector<token> gateway_env::prefill_prompt(const entry& e) {
  auto p = e.a->req.prompt;
  p.insert(p.end(), e.resumed_after.begin(), e.resumed_after.end());
  return p;
}

/// The first step, every failover and every resume: ask the scheduler for a route.
void gateway_env::route(const entry_ptr& e, bool failover) const {
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
            if (e->lc.terminal() || e->lc.state() == request_state::decoding)
              return; // ended, or an earlier attempt's KV arrived while re-routing
            e->route = d;
            e->lc.advance(request_state::routed);
            e->last_event = env.self->clock().now(); // the decode worker's silence counts from here
            // The decode reservation and the prefill go out together: the decode worker
            // keeps a transfer that overtakes its order, and a refused reservation
            // fails the request, which cancels the prefill.
            if (!failover)
              env.reserve_decode(e);
            env.prefill(e);
          },
          [env, e, failover](caf::error& err) {
            if (e->lc.terminal() || env.past_deadline(e))
              return;
            auto code = error_code(err);
            if (failover && code == errc::overloaded && env.switch_decode(e, err))
              return;
            if (code == errc::bad_reply)
              return env.fail(e, {.status = 500, .message = describe(err), .type = "server_error"},
                              "internal");
            env.fail(e,
                     code == errc::overloaded
                         ? unavailable("no capacity: " + describe(err))
                         : unavailable("scheduler unavailable: " + describe(err)),
                     "no_route");
          });
}

void gateway_env::reserve_decode(const entry_ptr& e) const {
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
              if (e->lc.terminal())
                return;
              if (error_code(err) == errc::overloaded)
                return env.fail(e,
                                {.status = 429,
                                 .message = "decode capacity exhausted: " + describe(err),
                                 .type = "rate_limit_error",
                                 .retry_after_s = 1},
                                "overloaded");
              if (e->route.decode_node() != node)
                return; // the request moved on already (its decode node was reported down)
              // The worker did not take the reservation (its node is down or does not
              // answer): the request goes to another decode worker, like a resume. Should
              // the worker have it after all, it drops it.
              env.cancel_decode(*e, "reservation_failed");
              env.resume(e, "its reservation failed: " + describe(err));
            });
}

void gateway_env::prefill(const entry_ptr& e) const {
  const auto& r = e->a->req;
  PrefillOrder o;
  o.set_request_id(e->a->id);
  e->transfer_id = ctx->new_id(); // unique per attempt, across nodes
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
  e->lc.advance(request_state::prefilling);
  auto env = *this;
  const uint64_t tid = e->transfer_id;
  prefill_of(*e)
      .request(self, o, remaining(*e))
      .then(
          [env, e, tid](PrefillDone& d) {
            if (e->lc.terminal() || tid != e->transfer_id)
              return;
            e->retransmits += d.retransmits();
            e->prefill_queue_ns = d.queue_ns();
            e->lc.advance(request_state::transferring); // no-op if decoding already
          },
          [env, e, tid](caf::error& err) {
            if (e->lc.terminal() || tid != e->transfer_id)
              return;
            if (e->lc.state() == request_state::decoding)
              return; // the KV arrived after all (e.g. the reply got lost)
            env.failover(e, err);
          });
}

void gateway_env::failover(const entry_ptr& e, const caf::error& err) const {
  if (past_deadline(e))
    return;
  const auto& failed = e->route.prefill_node();
  e->failed_prefill.push_back(failed);
  e->transfer_failed = error_code(err) == errc::transfer_failed;
  ctx->probe("gateway.prefill_failover");
  ctx->node_metrics()
      .counter("prfaas_gateway_failovers_total", "Prefill attempts re-routed to local prefill")
      .Increment();
  ctx->log()->warn("prefill_failover request={} failed_node={} attempt={} reason=\"{}\"", e->a->id,
                   failed, e->lc.attempts(), describe(err));
  Cancel c; // the old attempt's transfer, if it is still going
  c.set_request_id(e->a->id);
  c.set_transfer_id(e->transfer_id);
  c.set_reason("failover");
  prefill_of(*e).send(c);
  switch (rules::after_prefill_failure(e->lc.attempts(), e->resumes, cfg.max_attempts,
                                       error_code(err) == errc::overloaded)) {
  case rules::failover_verdict::give_up_overloaded:
    return fail(e,
                {.status = 429,
                 .message = "prefill capacity exhausted: " + describe(err),
                 .type = "rate_limit_error",
                 .retry_after_s = 1},
                "overloaded");
  case rules::failover_verdict::give_up:
    return fail(e,
                unavailable("prefill failed after " + std::to_string(e->lc.attempts()) +
                            " attempts: " + describe(err)),
                "prefill_failed");
  case rules::failover_verdict::retry_locally:
    break;
  }
  e->lc.advance(request_state::routed);
  route(e, true);
}

/// A KV transfer failed and no other prefill worker could take the request: the
/// transfer's other end may be the broken one (a decode node whose data plane refuses
/// it, a cut path to it), so the same prefill worker tries once more, to another
/// decode worker. The old reservation is cancelled; no tokens were delivered yet.
bool gateway_env::switch_decode(const entry_ptr& e, const caf::error& no_route) const {
  if (!e->transfer_failed || e->route.decode_node().empty() ||
      e->lc.state() != request_state::routed)
    return false;
  e->transfer_failed = false;
  const std::string from = e->route.decode_node();
  cancel_decode(*e, "transfer_failed");
  e->failed_decode.push_back(from);
  ctx->node_metrics()
      .counter("prfaas_gateway_decode_switches_total",
               "Requests moved to another decode worker after their KV transfer failed")
      .Increment();
  ctx->log()->warn("decode_switch request={} failed_node={} reason=\"{}\"", e->a->id, from,
                   describe(no_route));
  e->transfer_id = 0; // late replies of the old attempt are ignored
  e->route.clear_decode_node();
  e->route.clear_decode_actor();
  route(e, false);
  return true;
}

/// The node of `e`'s decode worker is gone: continue on another one.
void gateway_env::resume(const entry_ptr& e, const std::string& why) const {
  if (past_deadline(e))
    return;
  const std::string dead = e->route.decode_node();
  e->failed_decode.push_back(dead);
  if (!rules::may_resume(e->resumes, cfg.max_resumes))
    return fail(e,
                unavailable("decode worker on " + dead + " lost (" + why + "), after " +
                            std::to_string(e->resumes) + " resumes"),
                "decode_failed");
  ++e->resumes;
  ctx->probe("gateway.decode_resume");
  ctx->node_metrics()
      .counter("prfaas_gateway_decode_resumes_total",
               "Requests moved to another decode worker after theirs was lost")
      .Increment();
  ctx->log()->warn("decode_resume request={} failed_node={} delivered={} resume={} reason=\"{}\"",
                   e->a->id, dead, e->received, e->resumes, why);
  if (e->lc.state() == request_state::prefilling || e->lc.state() == request_state::transferring) {
    Cancel c; // its KV was going to the dead node
    c.set_request_id(e->a->id);
    c.set_transfer_id(e->transfer_id);
    c.set_reason("decode_lost");
    prefill_of(*e).send(c);
  }
  e->transfer_id = 0; // late replies of the old attempt are ignored
  e->resumed_after = e->tokens;
  e->route.clear_decode_node(); // events of the old worker are dropped from now on
  e->route.clear_decode_actor();
  e->lc.advance(request_state::routed);
  route(e, false);
}

/// A node is down: its decode work resumes elsewhere, and its prefill work (not yet
/// decoding) fails over at once rather than when the order's reply times out — its
/// reply may never come, or may have come before the KV was delivered.
void gateway_env::on_peer_down(const std::string& node) const {
  std::vector<entry_ptr> decode_lost, prefill_lost;
  for (auto& [id, e] : self->state.live) {
    switch (
        rules::on_node_down(e->lc.state(), e->route.decode_node(), e->route.prefill_node(), node)) {
    case rules::node_loss::resume:
      decode_lost.push_back(e);
      break;
    case rules::node_loss::failover:
      prefill_lost.push_back(e);
      break;
    case rules::node_loss::none:
      break;
    }
  }
  for (auto& e : decode_lost)
    resume(e, "node " + node + " is down");
  for (auto& e : prefill_lost)
    failover(e, make_error(errc::peer_down, "prefill node " + node + " is down"));
}

void gateway_env::on_tokens(const TokenEvent& ev) const {
  auto it = self->state.live.find(ev.request_id());
  if (it == self->state.live.end())
    return; // ended already (deadline, cancel): late events are dropped
  auto e = it->second;
  switch (rules::classify_tokens(e->route.decode_node(), e->received, ev.decode_node(), ev.index(),
                                 !ev.error().empty())) {
  case rules::token_verdict::stale_worker: // a decode worker the request has left
  case rules::token_verdict::duplicate:
    return;
  case rules::token_verdict::gap: // an event went missing on the way
    ctx->probe("gateway.token_gap");
    cancel_decode(*e, "token_gap"); // that worker's stream has a hole: continue on another one
    return resume(e, "tokens " + std::to_string(e->received) + ".." + std::to_string(ev.index()) +
                         " from " + ev.decode_node() + " were lost");
  case rules::token_verdict::failed:
    return fail(e,
                {.status = 502,
                 .message = "decode failed on " + ev.decode_node() + ": " + ev.error(),
                 .type = "server_error"},
                "decode_failed");
  case rules::token_verdict::take:
    break;
  }
  if (ev.tokens_size() > 0) {
    if (e->received == 0) {
      e->first_token_at = self->clock().now();
      e->engine_prefill_ns = ev.engine_prefill_ns();
      e->exposed_wire_ns = ev.exposed_wire_ns();
      e->decode_node = ev.decode_node();
      e->computed_tokens = ev.prefill_computed_tokens();
    }
    e->lc.advance(request_state::decoding);
    e->last_event = self->clock().now();
    output_delta out;
    for (int i = 0; i < ev.tokens_size(); ++i) {
      const token t = ev.tokens(i);
      ++e->received;
      e->tokens.push_back(t);
      std::optional<engine::sampled_logprobs> lp;
      if (i < ev.logprobs_size())
        lp = from_wire(ev.logprobs(i));
      out.append(e->text->feed(t, lp ? &*lp : nullptr));
      if (e->text->stopped())
        break;
    }
    if (!out.empty())
      e->a->channel->push(std::move(out));
    if (e->text->stopped()) { // a stop string: the output is complete; the worker may stop
      cancel_decode(*e, "stop_string");
      return finish(e, "stop");
    }
  }
  if (ev.finished()) {
    if (e->lc.state() != request_state::decoding) // finished with no token (e.g. stop at once)
      e->lc.advance(request_state::decoding);
    if (auto rest = e->text->finish(); !rest.empty())
      e->a->channel->push(std::move(rest));
    finish(e, ev.finish_reason());
  }
}

void gateway_env::sweep() const {
  auto now = self->clock().now();
  std::vector<entry_ptr> late, gone, silent;
  for (auto& [id, e] : self->state.live) {
    switch (rules::sweep({.client_gone = e->a->channel->abandoned(),
                          .now = now,
                          .deadline = e->deadline,
                          .last_event = e->last_event,
                          .stall_timeout = cfg.stall_timeout,
                          .state = e->lc.state(),
                          .status_asked = e->status_asked})) {
    case rules::sweep_verdict::abandoned:
      gone.push_back(e);
      break;
    case rules::sweep_verdict::deadline:
      late.push_back(e);
      break;
    case rules::sweep_verdict::check_stall:
      silent.push_back(e);
      break;
    case rules::sweep_verdict::none:
      break;
    }
  }
  for (auto& e : silent)
    check_stall(e);
  for (auto& e : gone)
    fail(e, {.status = 499, .message = "client closed the connection"}, "cancelled");
  for (auto& e : late)
    fail_deadline(e);
}

/// Nothing from its decode worker for stall_timeout (no token yet, or none since the last):
/// ask the worker whether it still has the request. One that restarted (a crash the node
/// survived, unseen by the failure detector) has forgotten it, and the request resumes
/// elsewhere, as when it does not answer; one that has it (waiting for a slot) is left alone.
void gateway_env::check_stall(const entry_ptr& e) const {
  e->status_asked = true;
  DecodeStatusQuery q;
  q.set_request_id(e->a->id);
  auto env = *this;
  const auto node = e->route.decode_node();
  decode_of(*e)
      .request(self, q, std::min(cfg.control_timeout, remaining(*e)))
      .then(
          [env, e, node](DecodeStatus& st) {
            e->status_asked = false;
            if (e->lc.terminal() || e->route.decode_node() != node)
              return;
            if (st.known()) {
              e->last_event = env.self->clock().now(); // alive: look again after another timeout
              return;
            }
            env.stalled(e, "decode worker on " + node + " no longer has the request");
          },
          [env, e, node](caf::error& err) {
            e->status_asked = false;
            if (e->lc.terminal() || e->route.decode_node() != node)
              return;
            env.stalled(e, "decode worker on " + node + " did not answer: " + describe(err));
          });
}

void gateway_env::stalled(const entry_ptr& e, const std::string& why) const {
  ctx->probe("gateway.stall_resume");
  cancel_decode(*e, "stalled");
  resume(e, why);
}

/// The request's deadline passed: 504. Whatever was waiting for it (a prefill
/// queue, a reply) is what made it late, and that is what the client is told, not
/// the failure of a step retried with no time left.
bool gateway_env::past_deadline(const entry_ptr& e) const {
  if (self->clock().now() < e->deadline)
    return false;
  fail_deadline(e);
  return true;
}

void gateway_env::fail_deadline(const entry_ptr& e) const {
  ctx->probe("gateway.deadline");
  fail(e,
       {.status = 504,
        .message = "deadline of " + format_duration(cfg.http.deadline) + " exceeded in state " +
                   to_string(e->lc.state()),
        .type = "server_error"},
       "deadline");
}

} // namespace prfaas::serving::gateway_detail

#include "gateway/request_tracker.hpp"

#include "common/sampling_wire.hpp"
#include "gateway/request_rules.hpp"

namespace prfaas::serving::gateway_detail {

std::vector<token> prefill_prompt(const entry& e) {
  auto p = e.a->req.prompt;
  p.insert(p.end(), e.resumed_after.begin(), e.resumed_after.end());
  return p;
}

api_error unavailable(const std::string& why) {
  return {.status = 503, .message = why, .type = "server_error", .retry_after_s = 1};
}

entry_ptr request_tracker::find(const std::string& id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

actions request_tracker::accept(std::shared_ptr<accepted_request> a,
                                std::unique_ptr<output_text> text) {
  auto e = std::make_shared<entry>();
  e->deadline = a->accepted + std::chrono::duration_cast<clock_type::duration>(cfg_.deadline);
  e->text = std::move(text);
  e->a = std::move(a);
  live_.emplace(e->a->id, e);
  return {act::ask_route{e, false}};
}

act::cancel request_tracker::cancel_decode(const entry_ptr& e, std::string reason) {
  return {.e = e,
          .at = act::cancel::role::decode,
          .node = e->route.decode_node(),
          .actor = e->route.decode_actor(),
          .reason = std::move(reason)};
}

act::cancel request_tracker::cancel_prefill(const entry_ptr& e, std::string reason) {
  return {.e = e,
          .at = act::cancel::role::prefill,
          .node = e->route.prefill_node(),
          .actor = e->route.prefill_actor(),
          .transfer_id = e->transfer_id,
          .reason = std::move(reason)};
}

void request_tracker::fail(const entry_ptr& e, api_error err, const char* outcome, actions& out) {
  if (!e->lc.advance(request_state::failed))
    return;
  // Whatever still works on it stops: its decode worker, and its prefill worker whatever
  // the attempt (transfer id 0).
  if (!e->route.decode_node().empty())
    out.push_back(cancel_decode(e, outcome));
  if (!e->route.prefill_node().empty()) {
    auto c = cancel_prefill(e, outcome);
    c.transfer_id = 0;
    out.push_back(std::move(c));
  }
  live_.erase(e->a->id);
  out.push_back(act::failed{e, std::move(err), outcome});
}

void request_tracker::finish(const entry_ptr& e, const std::string& reason, actions& out) {
  if (!e->lc.advance(request_state::done))
    return;
  live_.erase(e->a->id);
  out.push_back(act::finished{e, reason});
}

/// The request's deadline passed: 504. Whatever was waiting for it (a prefill
/// queue, a reply) is what made it late, and that is what the client is told, not
/// the failure of a step retried with no time left.
bool request_tracker::past_deadline(const entry_ptr& e, clock_type::time_point now, actions& out) {
  if (now < e->deadline)
    return false;
  fail_deadline(e, out);
  return true;
}

void request_tracker::fail_deadline(const entry_ptr& e, actions& out) {
  out.push_back(act::note{e, act::note::kind::deadline, "", ""});
  fail(e,
       {.status = 504,
        .message =
            "deadline of " + cfg_.deadline_text + " exceeded in state " + to_string(e->lc.state()),
        .type = "server_error"},
       "deadline", out);
}

actions request_tracker::routed(const entry_ptr& e, RouteDecision d, bool failover,
                                clock_type::time_point now) {
  actions out;
  if (e->lc.terminal() || e->lc.state() == request_state::decoding)
    return out; // ended, or an earlier attempt's KV arrived while re-routing
  e->route = std::move(d);
  e->lc.advance(request_state::routed);
  e->last_event = now; // the decode worker's silence counts from here
  // The decode reservation and the prefill go out together: the decode worker keeps a
  // transfer that overtakes its order, and a refused reservation fails the request,
  // which cancels the prefill.
  if (!failover)
    out.push_back(act::order_decode{e});
  prefill(e, out);
  return out;
}

void request_tracker::prefill(const entry_ptr& e, actions& out) {
  e->transfer_id = new_id_(); // unique per attempt, across nodes
  e->lc.advance(request_state::prefilling);
  out.push_back(act::order_prefill{e});
}

actions request_tracker::route_failed(const entry_ptr& e, const step_error& err, bool failover,
                                      clock_type::time_point now) {
  actions out;
  if (e->lc.terminal() || past_deadline(e, now, out))
    return out;
  if (failover && err.code == errc::overloaded && switch_decode(e, err, out))
    return out;
  if (err.code == errc::bad_reply)
    fail(e, {.status = 500, .message = err.text, .type = "server_error"}, "internal", out);
  else
    fail(e,
         err.code == errc::overloaded ? unavailable("no capacity: " + err.text)
                                      : unavailable("scheduler unavailable: " + err.text),
         "no_route", out);
  return out;
}

actions request_tracker::reserve_failed(const entry_ptr& e, const std::string& node,
                                        const step_error& err, clock_type::time_point now) {
  actions out;
  if (e->lc.terminal())
    return out;
  if (err.code == errc::overloaded) {
    fail(e,
         {.status = 429,
          .message = "decode capacity exhausted: " + err.text,
          .type = "rate_limit_error",
          .retry_after_s = 1},
         "overloaded", out);
    return out;
  }
  if (e->route.decode_node() != node)
    return out; // the request moved on already (its decode node was reported down)
  // The worker did not take the reservation (its node is down or does not answer): the
  // request goes to another decode worker, like a resume. Should the worker have it
  // after all, it drops it.
  out.push_back(cancel_decode(e, "reservation_failed"));
  resume(e, "its reservation failed: " + err.text, now, out);
  return out;
}

actions request_tracker::prefill_done(const entry_ptr& e, uint64_t tid, uint32_t retransmits,
                                      uint64_t queue_ns) {
  if (e->lc.terminal() || tid != e->transfer_id)
    return {};
  e->retransmits += retransmits;
  e->prefill_queue_ns = queue_ns;
  e->lc.advance(request_state::transferring); // no-op if decoding already
  return {};
}

actions request_tracker::prefill_failed(const entry_ptr& e, uint64_t tid, const step_error& err,
                                        clock_type::time_point now) {
  actions out;
  if (e->lc.terminal() || tid != e->transfer_id)
    return out;
  if (e->lc.state() == request_state::decoding)
    return out; // the KV arrived after all (e.g. the reply got lost)
  failover(e, err, now, out);
  return out;
}

void request_tracker::failover(const entry_ptr& e, const step_error& err,
                               clock_type::time_point now, actions& out) {
  if (past_deadline(e, now, out))
    return;
  e->failed_prefill.push_back(e->route.prefill_node());
  e->transfer_failed = err.code == errc::transfer_failed;
  out.push_back(act::note{e, act::note::kind::prefill_failover, e->route.prefill_node(), err.text});
  out.push_back(cancel_prefill(e, "failover")); // the old attempt's transfer, if still going
  switch (rules::after_prefill_failure(e->lc.attempts(), e->resumes, cfg_.max_attempts,
                                       err.code == errc::overloaded)) {
  case rules::failover_verdict::give_up_overloaded:
    return fail(e,
                {.status = 429,
                 .message = "prefill capacity exhausted: " + err.text,
                 .type = "rate_limit_error",
                 .retry_after_s = 1},
                "overloaded", out);
  case rules::failover_verdict::give_up:
    return fail(e,
                unavailable("prefill failed after " + std::to_string(e->lc.attempts()) +
                            " attempts: " + err.text),
                "prefill_failed", out);
  case rules::failover_verdict::retry_locally:
    break;
  }
  e->lc.advance(request_state::routed);
  out.push_back(act::ask_route{e, true});
}

/// A KV transfer failed and no other prefill worker could take the request: the
/// transfer's other end may be the broken one (a decode node whose data plane refuses
/// it, a cut path to it), so the same prefill worker tries once more, to another
/// decode worker. The old reservation is cancelled; no tokens were delivered yet.
bool request_tracker::switch_decode(const entry_ptr& e, const step_error& no_route, actions& out) {
  if (!e->transfer_failed || e->route.decode_node().empty() ||
      e->lc.state() != request_state::routed)
    return false;
  e->transfer_failed = false;
  const std::string from = e->route.decode_node();
  out.push_back(cancel_decode(e, "transfer_failed"));
  e->failed_decode.push_back(from);
  out.push_back(act::note{e, act::note::kind::decode_switch, from, no_route.text});
  e->transfer_id = 0; // late replies of the old attempt are ignored
  e->route.clear_decode_node();
  e->route.clear_decode_actor();
  out.push_back(act::ask_route{e, false});
  return true;
}

/// The node of `e`'s decode worker is gone: continue on another one.
void request_tracker::resume(const entry_ptr& e, const std::string& why, clock_type::time_point now,
                             actions& out) {
  if (past_deadline(e, now, out))
    return;
  const std::string dead = e->route.decode_node();
  e->failed_decode.push_back(dead);
  if (!rules::may_resume(e->resumes, cfg_.max_resumes))
    return fail(e,
                unavailable("decode worker on " + dead + " lost (" + why + "), after " +
                            std::to_string(e->resumes) + " resumes"),
                "decode_failed", out);
  ++e->resumes;
  out.push_back(act::note{e, act::note::kind::decode_resume, dead, why});
  if (e->lc.state() == request_state::prefilling || e->lc.state() == request_state::transferring)
    out.push_back(cancel_prefill(e, "decode_lost")); // its KV was going to the dead node
  e->transfer_id = 0;                                // late replies of the old attempt are ignored
  e->resumed_after = e->tokens;
  e->route.clear_decode_node(); // events of the old worker are dropped from now on
  e->route.clear_decode_actor();
  e->lc.advance(request_state::routed);
  out.push_back(act::ask_route{e, false});
}

actions request_tracker::peer_down(const std::string& node, clock_type::time_point now) {
  std::vector<entry_ptr> decode_lost, prefill_lost;
  for (auto& [id, e] : live_) {
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
  actions out;
  for (auto& e : decode_lost)
    resume(e, "node " + node + " is down", now, out);
  for (auto& e : prefill_lost)
    failover(e, {errc::peer_down, "prefill node " + node + " is down"}, now, out);
  return out;
}

actions request_tracker::tokens(const TokenEvent& ev, clock_type::time_point now) {
  actions out;
  auto e = find(ev.request_id());
  if (!e)
    return out; // ended already (deadline, cancel): late events are dropped
  switch (rules::classify_tokens(e->route.decode_node(), e->received, ev.decode_node(), ev.index(),
                                 !ev.error().empty())) {
  case rules::token_verdict::stale_worker: // a decode worker the request has left
  case rules::token_verdict::duplicate:
    return out;
  case rules::token_verdict::gap: // an event went missing on the way
    out.push_back(act::note{e, act::note::kind::token_gap, ev.decode_node(), ""});
    out.push_back(cancel_decode(e, "token_gap")); // that stream has a hole: go elsewhere
    resume(e,
           "tokens " + std::to_string(e->received) + ".." + std::to_string(ev.index()) + " from " +
               ev.decode_node() + " were lost",
           now, out);
    return out;
  case rules::token_verdict::failed:
    fail(e,
         {.status = 502,
          .message = "decode failed on " + ev.decode_node() + ": " + ev.error(),
          .type = "server_error"},
         "decode_failed", out);
    return out;
  case rules::token_verdict::take:
    break;
  }
  take_tokens(e, ev, now, out);
  return out;
}

void request_tracker::take_tokens(const entry_ptr& e, const TokenEvent& ev,
                                  clock_type::time_point now, actions& out) {
  if (ev.tokens_size() > 0) {
    if (e->received == 0) {
      e->first_token_at = now;
      e->engine_prefill_ns = ev.engine_prefill_ns();
      e->exposed_wire_ns = ev.exposed_wire_ns();
      e->decode_node = ev.decode_node();
      e->computed_tokens = ev.prefill_computed_tokens();
    }
    e->lc.advance(request_state::decoding);
    e->last_event = now;
    output_delta delta;
    for (int i = 0; i < ev.tokens_size(); ++i) {
      const token t = ev.tokens(i);
      ++e->received;
      e->tokens.push_back(t);
      std::optional<engine::sampled_logprobs> lp;
      if (i < ev.logprobs_size())
        lp = from_wire(ev.logprobs(i));
      delta.append(e->text->feed(t, lp ? &*lp : nullptr));
      if (e->text->stopped())
        break;
    }
    if (!delta.empty())
      out.push_back(act::output{e, std::move(delta)});
    if (e->text->stopped()) { // a stop string: the output is complete; the worker may stop
      out.push_back(cancel_decode(e, "stop_string"));
      return finish(e, "stop", out);
    }
  }
  if (ev.finished()) {
    if (e->lc.state() != request_state::decoding) // finished with no token (e.g. stop at once)
      e->lc.advance(request_state::decoding);
    if (auto rest = e->text->finish(); !rest.empty())
      out.push_back(act::output{e, std::move(rest)});
    finish(e, ev.finish_reason(), out);
  }
}

actions request_tracker::sweep(clock_type::time_point now) {
  std::vector<entry_ptr> late, gone, silent;
  for (auto& [id, e] : live_) {
    switch (rules::sweep({.client_gone = e->a->channel->abandoned(),
                          .now = now,
                          .deadline = e->deadline,
                          .last_event = e->last_event,
                          .stall_timeout = cfg_.stall_timeout,
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
  actions out;
  // Nothing from its decode worker for stall_timeout (no token yet, or none since the
  // last): ask the worker whether it still has the request.
  for (auto& e : silent) {
    e->status_asked = true;
    out.push_back(act::ask_status{e, e->route.decode_node()});
  }
  for (auto& e : gone)
    fail(e, {.status = 499, .message = "client closed the connection"}, "cancelled", out);
  for (auto& e : late)
    fail_deadline(e, out);
  return out;
}

/// One that restarted (a crash the node survived, unseen by the failure detector) has
/// forgotten the request, and it resumes elsewhere, as when the worker does not answer;
/// one that has it (waiting for a slot) is left alone.
actions request_tracker::status(const entry_ptr& e, const std::string& node, bool known,
                                clock_type::time_point now) {
  actions out;
  e->status_asked = false;
  if (e->lc.terminal() || e->route.decode_node() != node)
    return out;
  if (known) {
    e->last_event = now; // alive: look again after another timeout
    return out;
  }
  stalled(e, "decode worker on " + node + " no longer has the request", now, out);
  return out;
}

actions request_tracker::status_failed(const entry_ptr& e, const std::string& node,
                                       const step_error& err, clock_type::time_point now) {
  actions out;
  e->status_asked = false;
  if (e->lc.terminal() || e->route.decode_node() != node)
    return out;
  stalled(e, "decode worker on " + node + " did not answer: " + err.text, now, out);
  return out;
}

void request_tracker::stalled(const entry_ptr& e, const std::string& why,
                              clock_type::time_point now, actions& out) {
  out.push_back(act::note{e, act::note::kind::stall_resume, e->route.decode_node(), why});
  out.push_back(cancel_decode(e, "stalled"));
  resume(e, why, now, out);
}

} // namespace prfaas::serving::gateway_detail

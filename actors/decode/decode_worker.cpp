// `decode_worker`: receives a request's KVCache over the data plane, imports it and
// decodes with continuous batching, streaming tokens to the request's gateway.
//
// Protocol (serving.proto):
//  * DecodeOrder (request) reserves a slot — refused with errc::overloaded beyond
//    `max_queue` orders — and is answered at once (DecodeAccepted);
//  * the KV transfer (data plane, sink = this actor's name) may arrive before or
//    after its order; the first complete transfer for a request wins (a failover's
//    second attempt may race a late first one: the loser is dropped);
//  * tokens go out as TokenEvents [index, index + n) as each batch step ends (or
//    every `event_steps` steps, and at once when a sequence finishes); the
//    first event carries the first token (sampled by the prefill) and the timings,
//    and is sent as soon as the transfer is complete, before the import. Events go
//    one-way, except a stream's last one: a request, re-sent until acknowledged;
//  * Cancel (one-way) drops the request at the next step boundary;
//  * DecodeStatusQuery (request) tells whether this worker holds a request — a worker
//    restarted after a crash holds none of its predecessor's;
//  * an order whose KV has not arrived by its deadline ends with an error event.
//  * an end-of-output token (model_info::is_end) ends a sequence; stop strings are
//    matched by the gateway on the text, which cancels the request when one matched;
// Batching: at every step boundary, imported sequences join the batch up to
// `max_batch`; finished ones leave. Engine calls run on the engine's own thread.

#include <atomic>
#include <deque>
#include <map>
#include <unordered_map>

#include <caf/all.hpp>

#include "common/actor_inbox.hpp"
#include "common/crash_log.hpp"
#include "common/engine_runner.hpp"
#include "common/engine_setup.hpp"
#include "common/worker_metrics.hpp"
#include "decode/decode_settings.hpp"
#include "decode/decode_state.hpp"
#include "decode/early_transfers.hpp"
#include "common/sampling_wire.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/peer_loss.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/messages/decode.hpp"
#include "prfaas/messages/gateway.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/serving.pb.h"

namespace prfaas::serving {

using namespace decode_detail;

namespace {

void update_gauges(self_ptr self) {
  auto& s = self->state;
  s.stats->set(s.by_request.size() - s.active.size(), s.active.size(), s.max_batch);
}

/// Sends token events to a gateway. Events go one-way, except those that end a
/// stream: a lost middle event shows as a gap at the next one (the gateway resumes
/// the request), but a lost last event would leave the stream open until its
/// deadline, so it travels as a request, re-sent until the gateway acknowledges it.
template <class Msg>
void deliver(self_ptr self, const address& gateway, const Msg& m, bool ends_a_stream) {
  auto& s = self->state;
  const auto gw = role_ref<gateway_role>(*s.ctx, s.self_name, gateway);
  if (!ends_a_stream) {
    gw.send(m);
    return;
  }
  gw.request(self, m, s.ctx->msgr().config().request_timeout)
      .then([] {},
            [ctx = s.ctx, gw = gateway.to_string()](caf::error& e) {
              ctx->log()->warn("decode_final_event_lost gateway={} error=\"{}\"", gw, describe(e));
            });
}

void send_event(self_ptr self, sequence& q, std::vector<engine::token> tokens, bool finished,
                const std::string& reason, const std::string& error = {},
                const std::vector<engine::sampled_logprobs>& logprobs = {}) {
  auto& s = self->state;
  TokenEvent ev;
  ev.set_request_id(q.order.request_id());
  ev.set_index(q.order.first_index() + q.sent); // a resumed request continues its numbering
  for (auto t : tokens) // decode.corrupt_token: the token checker's negative control
    ev.add_tokens(s.ctx->faults().fire("decode.corrupt_token") ? t ^ 1 : t);
  for (auto& lp : logprobs)
    to_wire(lp, *ev.add_logprobs());
  ev.set_finished(finished);
  ev.set_finish_reason(reason);
  ev.set_error(error);
  if (q.sent == 0 && !tokens.empty()) {
    ev.set_engine_prefill_ns(q.meta.engine_ns());
    ev.set_prefill_computed_tokens(q.meta.computed_tokens());
    ev.set_exposed_wire_ns(q.exposed_wire_ns);
  }
  ev.set_decode_node(s.ctx->node());
  q.sent += static_cast<uint32_t>(tokens.size());
  s.stats->tokens.Increment(static_cast<double>(tokens.size()));
  if (s.batching) {
    s.finish_pending = s.finish_pending || finished;
    auto& [addr, batch] = s.pending_events[q.gateway.to_string()];
    addr = q.gateway;
    *batch.add_events() = std::move(ev);
    return;
  }
  deliver(self, q.gateway, ev, finished);
}

/// Sends what the steps since the last flush produced: one message per gateway.
void flush_events(self_ptr self) {
  auto& s = self->state;
  s.batching = false;
  if (++s.steps_pending < s.event_steps && !s.finish_pending)
    return; // more steps join these events
  for (auto& [_, entry] : s.pending_events) {
    bool ends = false;
    for (auto& ev : entry.second.events())
      ends = ends || ev.finished();
    deliver(self, entry.first, entry.second, ends);
  }
  s.pending_events.clear();
  s.steps_pending = 0;
  s.finish_pending = false;
}

/// Queues `job` on the engine thread and ends the running run of decode steps at its
/// next step, so that the job (an import, a release) runs then rather than after the
/// whole run: a run lasts until a sequence leaves the batch, which can be its every
/// remaining token.
void post_between_steps(decode_state& s, engine_runner::job job) {
  s.batch_changed->store(true);
  s.runner->post(std::move(job));
}

/// Removes `q` everywhere and frees its engine sequence.
void forget(self_ptr self, const sequence_ptr& q) {
  auto& s = self->state;
  s.batch_changed->store(true);
  s.by_request.erase(q->order.request_id());
  std::erase(s.active, q);
  std::erase(s.ready, q);
  if (q->seq != 0)
    post_between_steps(s, [id = q->seq](engine::engine& e) { e.release(id); });
  update_gauges(self);
}

void fail(self_ptr self, const sequence_ptr& q, const std::string& why) {
  send_event(self, *q, {}, true, "error", why);
  self->state.stats->failed.Increment();
  forget(self, q);
}

/// Accounts one sampled token (with its log-probabilities when asked); sends it; true
/// when `q` finished. An end-of-output token ends it (unless ignore_eos) and is not
/// sent; stop strings are the gateway's (it cancels the request when one matched).
bool accept_token(self_ptr self, const sequence_ptr& q, engine::token t,
                  const std::optional<engine::sampled_logprobs>& lp) {
  ++q->generated;
  std::vector<engine::token> out;
  std::vector<engine::sampled_logprobs> lps;
  std::string reason;
  if (self->state.info.is_end(t) && !q->order.ignore_eos()) {
    reason = "stop";
  } else {
    out.push_back(t);
    if (q->logprobs && lp)
      lps.push_back(*lp);
    if (q->generated >= q->order.max_tokens())
      reason = "length";
  }
  bool finished = !reason.empty();
  if (!out.empty() || finished)
    send_event(self, *q, std::move(out), finished, reason, {}, lps);
  if (finished) {
    self->state.stats->ok.Increment();
    forget(self, q);
  }
  return finished;
}

void maybe_step(self_ptr self);

/// One step's results. `last`: the engine job that ran it is over (it runs steps back to
/// back while the batch stays as it is), so the next batch may be formed.
void step_done(self_ptr self, std::vector<sequence_ptr> batch,
               engine::result<std::vector<engine::token>> r,
               std::vector<std::optional<engine::sampled_logprobs>> lps, bool last) {
  auto& s = self->state;
  if (last)
    s.stepping = false;
  s.batching = true;
  if (!r) {
    for (auto& q : batch)
      if (!q->cancelled && s.by_request.count(q->order.request_id()))
        fail(self, q, "decode step failed: " + r.message());
  } else {
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& q = batch[i];
      if (q->cancelled || !s.by_request.count(q->order.request_id()))
        continue;
      accept_token(self, q, (*r)[i], lps[i]);
    }
  }
  flush_events(self);
  if (last)
    maybe_step(self);
}

void maybe_step(self_ptr self) {
  auto& s = self->state;
  if (s.stepping)
    return;
  if (!s.active.empty() && s.ctx->faults().fire("decode.crash"))
    throw std::runtime_error("fault point decode.crash: crashing at a batch step");
  std::erase_if(s.active, [](auto& q) { return q->cancelled; });
  while (s.active.size() < s.max_batch && !s.ready.empty()) {
    auto q = s.ready.front();
    s.ready.pop_front();
    q->at = phase::active;
    s.active.push_back(q);
  }
  update_gauges(self);
  if (s.active.empty())
    return;
  s.stepping = true;
  s.batch_changed->store(false);
  // The engine runs steps back to back while the batch stays as it is — no sequence
  // finished, joined or was cancelled (batch_changed) — handing each step's tokens to
  // this actor as it goes; waiting for the actor between steps would leave the compute
  // threads idle for two thread hand-offs a token. In a simulation, one step a job.
  struct limit {
    uint32_t left; ///< tokens it may still sample
    bool ignore_eos;
  };
  std::vector<engine::seq_id> ids;
  std::vector<limit> limits;
  for (auto& q : s.active) {
    ids.push_back(q->seq);
    limits.push_back({q->order.max_tokens() - std::min(q->generated, q->order.max_tokens()),
                      q->order.ignore_eos()});
  }
  const uint32_t steps = s.runner->simulated() ? 1 : UINT32_MAX;
  s.runner->post([inbox = s.inbox, self, batch = s.active, ids, limits, steps,
                  changed = s.batch_changed, runner = s.runner.get()](engine::engine& e) mutable {
    for (uint32_t n = 0;; ++n) {
      const auto t0 = runner->now(); // the engine's time: virtual in simulation
      auto r = e.decode_step(ids);
      const double step_s = std::chrono::duration<double>(runner->now() - t0).count();
      bool last = !r || n + 1 >= steps || changed->load();
      std::vector<std::optional<engine::sampled_logprobs>> lps(ids.size());
      if (r)
        for (size_t i = 0; i < ids.size(); ++i) {
          if (batch[i]->logprobs)
            lps[i] = e.last_logprobs(ids[i]);
          const auto t = (*r)[i];
          if (--limits[i].left == 0 || (e.info().is_end(t) && !limits[i].ignore_eos))
            last = true; // a sequence leaves the batch
        }
      inbox->post([self, batch, r = std::move(r), lps = std::move(lps), counters = e.counters(),
                   last, step_s]() mutable {
        self->state.stats->engine_counters(counters);
        if (r)
          self->state.stats->decode_step(batch.size(), step_s);
        step_done(self, batch, std::move(r), std::move(lps), last);
      });
      if (last)
        return;
    }
  });
}

void imported(self_ptr self, const sequence_ptr& q, const std::string& error) {
  auto& s = self->state;
  if (q->cancelled || !s.by_request.count(q->order.request_id())) {
    if (error.empty())
      post_between_steps(s, [id = q->seq](engine::engine& e) { e.release(id); });
    return;
  }
  if (!error.empty()) {
    q->seq = 0;
    fail(self, q, "kv import failed: " + error);
    return;
  }
  q->at = phase::ready;
  s.ready.push_back(q);
  s.batch_changed->store(true); // it joins at the next step boundary
  maybe_step(self);
}

/// A complete transfer for `q` arrived: import it on the engine thread.
void start_import(self_ptr self, const sequence_ptr& q, received_transfer rt) {
  auto& s = self->state;
  if (rt.chunks.empty() || !q->meta.ParseFromArray(rt.chunks.back()->data(),
                                                   static_cast<int>(rt.chunks.back()->size()))) {
    fail(self, q,
         "kv transfer " + std::to_string(rt.id) + " from " + rt.source +
             " has no TransferMeta in its last chunk");
    return;
  }
  q->at = phase::importing;
  q->seq = s.next_seq++;
  q->exposed_wire_ns = static_cast<uint64_t>(rt.stats.exposed_wire_time().count());
  // The first token was sampled by the prefill and the whole KV is here, checksummed:
  // send it now rather than after the import, which waits for the running decode step
  // on the engine thread (a step of a large batch takes tens of milliseconds).
  std::optional<engine::sampled_logprobs> first_lp;
  if (q->meta.has_first_logprobs())
    first_lp = from_wire(q->meta.first_logprobs());
  if (accept_token(self, q, q->meta.first_token(), first_lp))
    return; // done with one token: no import needed
  auto chunks = std::make_shared<std::vector<bulk_ptr>>(std::move(rt.chunks));
  chunks->pop_back();
  post_between_steps(s, [inbox = s.inbox, self, q, chunks](engine::engine& e) {
    std::vector<engine::kv_chunk> parsed;
    parsed.reserve(chunks->size());
    std::string error;
    // A message holds one chunk or several (the sender's layers_per_push).
    for (size_t i = 0; i < chunks->size() && error.empty(); ++i) {
      const auto& m = *(*chunks)[i];
      if (m.size() == 0)
        error = "kv transfer message " + std::to_string(i) + " is empty";
      else if (auto r = engine::parse_stream_into({m.data(), m.size()}, parsed); !r)
        error = "kv transfer message " + std::to_string(i) + ": " + r.message();
    }
    if (error.empty())
      if (auto r = e.import_sequence(q->seq, parsed); !r)
        error = r.message();
    inbox->post([self, q, error] { imported(self, q, error); });
  });
}

/// A transfer parked before its order was dropped: the limits were reached, or its
/// order did not come within early_ttl. Should the order come after all, the request
/// waits for a KV transfer that will not arrive, and ends at its deadline (the gateway
/// fails it over before that when the prefill worker says its transfer was delivered).
void drop_early(self_ptr self, const std::string& request_id, const char* reason) {
  auto& s = self->state;
  s.ctx->node_metrics()
      .counter("prfaas_decode_early_transfers_dropped_total",
               "KV transfers that arrived before their order and were dropped, by reason",
               {{"worker", s.self_name}, {"reason", reason}})
      .Increment();
  s.ctx->log()->warn("decode_early_transfer_dropped worker={} request={} reason={}", s.self_name,
                     request_id, reason);
}

void on_transfer(self_ptr self, received_transfer rt) {
  auto& s = self->state;
  TransferMeta head;
  if (!head.ParseFromString(rt.meta) || head.request_id().empty()) {
    s.ctx->log()->warn("kv_transfer_dropped id={} source={} reason=\"meta is not a TransferMeta\"",
                       rt.id, rt.source);
    return;
  }
  auto it = s.by_request.find(head.request_id());
  if (it == s.by_request.end()) {
    // The order may still be on its way (different sender, different path).
    uint64_t bytes = 0;
    for (auto& c : rt.chunks)
      bytes += c ? c->size() : 0;
    for (auto& id : s.early.park(head.request_id(), std::move(rt), bytes, self->clock().now()))
      drop_early(self, id, "full");
    return;
  }
  if (it->second->at != phase::waiting_kv)
    return; // a slower attempt of a request that already has its KV
  start_import(self, it->second, std::move(rt));
}

void sweep(self_ptr self) {
  auto& s = self->state;
  auto now = self->clock().now();
  std::vector<sequence_ptr> late;
  for (auto& [id, q] : s.by_request)
    if (q->at == phase::waiting_kv && now >= q->deadline)
      late.push_back(q);
  for (auto& q : late) {
    s.ctx->probe("decode.order_expired");
    fail(self, q, "the KV transfer did not arrive before the request's deadline");
  }
  for (auto& id : s.early.expire(now))
    drop_early(self, id, "expired");
}

/// The engine is built: transfers are taken from now on (live it is built on its own
/// thread, seconds for a real model; until then the node refuses them and load reports
/// say "starting").
void ready(self_ptr self, const std::string& engine_name, const engine::model_info& info) {
  auto& s = self->state;
  s.info = info;
  s.engine_ready = true;
  s.stats->ready.Set(1);
  s.ctx->data()->add_sink(s.self_name, [inbox = s.inbox, self](received_transfer rt) {
    inbox->post([self, rt = std::move(rt)]() mutable { on_transfer(self, std::move(rt)); });
  });
  s.ctx->log()->info("decode_worker_started name={} engine={} model={} max_batch={}", s.self_name,
                     engine_name, info.model, s.max_batch);
}

/// `peer` went down or declared this node down: the requests of its gateway are stale
/// (it failed or resumed them elsewhere) — reservations and streams alike are dropped.
void drop_requests_of(self_ptr self, const std::string& peer, const std::string& why) {
  auto& s = self->state;
  std::vector<sequence_ptr> stale;
  for (auto& [_, q] : s.by_request)
    if (q->gateway.node == peer)
      stale.push_back(q);
  for (auto& q : stale) {
    q->cancelled = true;
    forget(self, q);
  }
  if (stale.empty())
    return;
  s.ctx->log()->warn("decode_requests_dropped worker={} count={} gateway={} reason=\"{}\"",
                     s.self_name, stale.size(), peer, why);
  s.ctx->probe("decode.stale_dropped");
  if (!s.stepping)
    maybe_step(self);
}

caf::behavior decode_worker(self_ptr self, node_context* ctx, std::string name,
                            model_settings model, size_t max_batch, size_t max_queue,
                            uint32_t event_steps,
                            early_transfers<received_transfer>::limits early) {
  auto& s = self->state;
  s.early = early_transfers<received_transfer>{early};
  log_crashes(self, ctx, name);
  s.event_steps = event_steps;
  s.ctx = ctx;
  s.self_name = name;
  s.max_batch = max_batch;
  s.max_queue = max_queue;
  s.inbox = std::make_shared<actor_inbox>(self);
  s.stats = std::make_unique<worker_metrics>(ctx->node_metrics(), name, "decode");
  if (!ctx->data())
    throw std::runtime_error("decode_worker " + name + ": node " + ctx->node() +
                             " has no data endpoint (nodes[].data) for the KV data plane");
  s.runner = std::make_unique<engine_runner>(
      ctx->system(), [model, name](engine::clock& c) { return make_engine(model, name, c); },
      "dc." + name, engine_runner::crash(s.inbox));
  s.runner->when_ready(s.inbox, [self, engine_name = model.engine](const engine::model_info& info) {
    ready(self, engine_name, info);
  });
  update_gauges(self);
  self->send(self, caf::tick_atom_v);
  auto lost = [=](const std::string& peer, const std::string& why) {
    drop_requests_of(self, peer, why);
  };
  return on_peer_lost(self, *ctx, lost)
      .or_else(caf::behavior{
          [=](wake_atom) { self->state.inbox->drain(); },
          [=](caf::tick_atom) {
            sweep(self);
            self->delayed_send(self, std::chrono::milliseconds(100), caf::tick_atom_v);
          },
          [=](remote_message& msg) -> caf::result<remote_message> {
            auto& s = self->state;
            return dispatch<decode_role>(
                *ctx, msg,
                [&](DecodeOrder& o) -> answer<DecodeAccepted> {
                  if (o.max_tokens() == 0 || o.gateway_node().empty())
                    return make_error(errc::bad_request,
                                      "DecodeOrder " + o.request_id() +
                                          ": needs max_tokens > 0 and a gateway");
                  if (s.by_request.count(o.request_id())) { // a retried order: same answer
                    return DecodeAccepted{};
                  }
                  if (s.by_request.size() >= s.max_queue) {
                    s.stats->rejected.Increment();
                    return make_error(errc::overloaded, "decode worker " + name + ": " +
                                                            std::to_string(s.max_queue) +
                                                            " requests already");
                  }
                  auto q = std::make_shared<sequence>();
                  q->gateway = {o.gateway_node(), o.gateway_actor()};
                  q->deadline =
                      self->clock().now() +
                      std::chrono::nanoseconds(o.budget_ns() ? o.budget_ns() : 60'000'000'000ull);
                  q->logprobs = o.sampling().logprobs();
                  q->order = std::move(o);
                  s.by_request.emplace(q->order.request_id(), q);
                  update_gauges(self);
                  if (auto rt = s.early.take(q->order.request_id()))
                    start_import(self, q, std::move(*rt));
                  return DecodeAccepted{};
                },
                [&](LoadQuery&) {
                  WorkerLoad l;
                  l.set_role("decode");
                  l.set_queue_depth(static_cast<uint32_t>(s.by_request.size() - s.active.size()));
                  l.set_active(static_cast<uint32_t>(s.active.size()));
                  l.set_capacity(static_cast<uint32_t>(s.max_batch));
                  l.set_load(static_cast<double>(s.by_request.size()) / s.max_batch);
                  l.set_starting(!s.engine_ready);
                  return l;
                },
                [&](DecodeStatusQuery& q) {
                  DecodeStatus st;
                  if (auto it = s.by_request.find(q.request_id()); it != s.by_request.end()) {
                    st.set_known(true);
                    st.set_sent(it->second->sent);
                  }
                  return st;
                },
                [&](Cancel& c) {
                  if (auto it = s.by_request.find(c.request_id()); it != s.by_request.end()) {
                    auto q = it->second;
                    q->cancelled = true;
                    forget(self, q);
                    if (!s.stepping)
                      maybe_step(self);
                  }
                  s.early.forget(c.request_id());
                });
          },
      });
}

void register_types(actor_registry& r) {
  r.add({.name = "decode_worker",
         .doc = "imports KVCache from the data plane and decodes with continuous batching",
         .params = decode_params(),
         .factory =
             [](node_context& ctx, const std::string& name, const actor_params& p) {
               auto model = read_model(ctx.deployment(), p.str("profile"), name);
               model.slots = static_cast<uint32_t>(p.integer("max_batch"));
               return ctx.system().spawn(
                   decode_worker, &ctx, name, model, static_cast<size_t>(p.integer("max_batch")),
                   static_cast<size_t>(p.integer("max_queue")),
                   static_cast<uint32_t>(p.integer("event_steps")),
                   early_transfers<received_transfer>::limits{
                       .max_transfers = static_cast<size_t>(p.integer("max_early_transfers")),
                       .max_bytes = p.bytes("max_early_bytes"),
                       .ttl = p.dur("early_ttl")});
             },
         .check = check_decode_params,
         .check_deployment = check_worker_model});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

// Its rare paths (a chaos run shows which it took) and its fault points.
PRFAAS_REGISTER_PROBES(
    decode,
    {"decode.order_expired",
     "a decode reservation ended because its KV never arrived (the lease ran out)"},
    {"decode.stale_dropped", "requests were dropped because their gateway went down or declared "
                             "this node down"})
PRFAAS_REGISTER_FAULT_POINTS(decode,
                             {"decode.crash",
                              "a decode worker crashes (throws) at a batch step, "
                              "forgetting its requests; its supervisor restarts it"},
                             {"decode.corrupt_token",
                              "a decoded token is sent altered (its lowest bit flipped): a "
                              "negative control for checkers of the output"})

} // namespace prfaas::serving

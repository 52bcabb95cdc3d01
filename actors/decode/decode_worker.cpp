// `decode_worker`: receives a request's KVCache over the data plane, imports it and
// decodes with continuous batching, streaming tokens to the request's gateway.
//
// Protocol (decode.proto; Cancel and LoadQuery in serving_common.proto):
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
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/decode.pb.h"
#include "prfaas/wire/gateway.pb.h"

namespace prfaas::serving {

using namespace decode_detail;

namespace {

void update_gauges(self_ptr self) {
  auto& s = self->state;
  s.stats->set(s.batcher->queued(), s.batcher->active(), s.batcher->config().max_batch);
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

/// Carries out what the batcher asked for, in its order — token events to gateways,
/// engine sequences to release between steps — and publishes its counts.
void act(self_ptr self) {
  auto& s = self->state;
  for (auto& a : s.batcher->take_actions()) {
    if (auto* d = std::get_if<decode_batcher::delivery>(&a))
      std::visit([&](const auto& m) { deliver(self, d->gateway, m, d->ends); }, d->what);
    else
      s.runner->post(
          [id = std::get<decode_batcher::release>(a).seq](engine::engine& e) { e.release(id); });
  }
  const auto& now = s.batcher->totals();
  auto add = [](prometheus::Counter& c, uint64_t to, uint64_t& was) {
    if (to > was)
      c.Increment(static_cast<double>(to - was));
    was = to;
  };
  add(s.stats->ok, now.ok, s.published.ok);
  add(s.stats->failed, now.failed, s.published.failed);
  add(s.stats->rejected, now.rejected, s.published.rejected);
  add(s.stats->tokens, now.tokens, s.published.tokens);
  update_gauges(self);
}

/// Queues `job` on the engine thread and ends the running run of decode steps at its
/// next step, so that the job (an import) runs then rather than after the whole run: a
/// run lasts until a sequence leaves the batch, which can be its every remaining token.
void post_between_steps(decode_state& s, engine_runner::job job) {
  s.batcher->batch_changed()->store(true);
  s.runner->post(std::move(job));
}

void maybe_step(self_ptr self);

/// One step's results. `last`: the engine job that ran it is over (it runs steps back to
/// back while the batch stays as it is), so the next batch may be formed.
void step_done(self_ptr self, const std::vector<sequence_ptr>& batch,
               engine::result<std::vector<engine::token>> r,
               std::vector<std::optional<engine::sampled_logprobs>> lps, bool last) {
  self->state.batcher->step_done(batch, r, lps, last);
  act(self);
  if (last)
    maybe_step(self);
}

void maybe_step(self_ptr self) {
  auto& s = self->state;
  if (s.batcher->stepping())
    return;
  if (s.batcher->has_active() && s.ctx->faults().fire("decode.crash"))
    throw std::runtime_error("fault point decode.crash: crashing at a batch step");
  auto order = s.batcher->start_step();
  update_gauges(self);
  if (!order)
    return;
  // The engine runs steps back to back while the batch stays as it is — no sequence
  // finished, joined or was cancelled (batch_changed) — handing each step's tokens to
  // this actor as it goes; waiting for the actor between steps would leave the compute
  // threads idle for two thread hand-offs a token. In a simulation, one step a job.
  const uint32_t steps = s.runner->simulated() ? 1 : UINT32_MAX;
  s.runner->post([inbox = s.inbox, self, batch = std::move(order->batch),
                  ids = std::move(order->ids), limits = std::move(order->limits), steps,
                  changed = s.batcher->batch_changed(),
                  runner = s.runner.get()](engine::engine& e) mutable {
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
  self->state.batcher->imported(q, error);
  act(self);
  maybe_step(self);
}

/// A complete transfer for `q` arrived: import it on the engine thread.
void start_import(self_ptr self, const sequence_ptr& q, received_transfer rt) {
  auto& s = self->state;
  TransferMeta meta;
  if (rt.chunks.empty() ||
      !meta.ParseFromArray(rt.chunks.back()->data(), static_cast<int>(rt.chunks.back()->size()))) {
    s.batcher->fail(q, "kv transfer " + std::to_string(rt.id) + " from " + rt.source +
                           " has no TransferMeta in its last chunk");
    act(self);
    return;
  }
  const bool import = s.batcher->kv_arrived(
      q, std::move(meta), static_cast<uint64_t>(rt.stats.exposed_wire_time().count()));
  act(self);
  if (!import)
    return; // done with one token: no import needed
  auto chunks = std::make_shared<std::vector<bulk_ptr>>(std::move(rt.chunks));
  chunks->pop_back();
  post_between_steps(s, [inbox = s.inbox, self, q, chunks, runner = s.runner.get(),
                         parsed = s.import_chunks](engine::engine& e) {
    const auto t0 = runner->now(); // the engine's time: virtual in simulation
    size_t n = 0;
    std::string error;
    // A message holds one chunk or several (the sender's layers_per_push).
    for (size_t i = 0; i < chunks->size() && error.empty(); ++i) {
      const auto& m = *(*chunks)[i];
      if (m.size() == 0)
        error = "kv transfer message " + std::to_string(i) + " is empty";
      else if (auto r = engine::parse_stream_over({m.data(), m.size()}, *parsed, n); !r)
        error = "kv transfer message " + std::to_string(i) + ": " + r.message();
      else
        n = *r;
    }
    if (error.empty())
      if (auto r = e.import_sequence(q->seq, std::span(*parsed).first(n)); !r)
        error = r.message();
    const double import_s = std::chrono::duration<double>(runner->now() - t0).count();
    inbox->post([self, q, error, import_s] {
      if (error.empty())
        self->state.stats->import_done(import_s);
      imported(self, q, error);
    });
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
  auto q = s.batcher->find(head.request_id());
  if (!q) {
    // The order may still be on its way (different sender, different path).
    uint64_t bytes = 0;
    for (auto& c : rt.chunks)
      bytes += c ? c->size() : 0;
    for (auto& id : s.early.park(head.request_id(), std::move(rt), bytes, self->clock().now()))
      drop_early(self, id, "full");
    return;
  }
  if (q->at != phase::waiting_kv)
    return; // a slower attempt of a request that already has its KV
  start_import(self, q, std::move(rt));
}

void sweep(self_ptr self) {
  auto& s = self->state;
  auto now = self->clock().now();
  for (size_t n = s.batcher->sweep(now); n > 0; --n)
    s.ctx->probe("decode.order_expired");
  act(self);
  for (auto& id : s.early.expire(now))
    drop_early(self, id, "expired");
}

/// The engine is built: transfers are taken from now on (live it is built on its own
/// thread, seconds for a real model; until then the node refuses them and load reports
/// say "starting").
void ready(self_ptr self, const std::string& engine_name, const engine::model_info& info) {
  auto& s = self->state;
  s.batcher->set_model(info);
  s.engine_ready = true;
  s.stats->ready.Set(1);
  s.ctx->data()->add_sink(s.self_name, [inbox = s.inbox, self](received_transfer rt) {
    inbox->post([self, rt = std::move(rt)]() mutable { on_transfer(self, std::move(rt)); });
  });
  s.ctx->log()->info("decode_worker_started name={} engine={} model={} max_batch={}", s.self_name,
                     engine_name, info.model, s.batcher->config().max_batch);
}

/// `peer` went down or declared this node down: the requests of its gateway are stale
/// (it failed or resumed them elsewhere) — reservations and streams alike are dropped.
void drop_requests_of(self_ptr self, const std::string& peer, const std::string& why) {
  auto& s = self->state;
  const size_t dropped = s.batcher->drop_gateway(peer);
  act(self);
  if (dropped == 0)
    return;
  s.ctx->log()->warn("decode_requests_dropped worker={} count={} gateway={} reason=\"{}\"",
                     s.self_name, dropped, peer, why);
  s.ctx->probe("decode.stale_dropped");
  maybe_step(self);
}

/// A DecodeOrder: a reservation (or the same answer to a retry); a transfer that
/// came first is imported at once.
answer<DecodeAccepted> take_order(self_ptr self, DecodeOrder o) {
  auto& s = self->state;
  const auto id = o.request_id();
  switch (s.batcher->order(std::move(o), self->clock().now())) {
  case decode_batcher::admission::bad_request:
    return make_error(errc::bad_request,
                      "DecodeOrder " + id + ": needs max_tokens > 0 and a gateway");
  case decode_batcher::admission::overloaded:
    act(self);
    return make_error(errc::overloaded, "decode worker " + s.self_name + ": " +
                                            std::to_string(s.batcher->config().max_queue) +
                                            " requests already");
  case decode_batcher::admission::duplicate:
    return DecodeAccepted{};
  case decode_batcher::admission::accepted:
    break;
  }
  update_gauges(self);
  if (auto rt = s.early.take(id))
    start_import(self, s.batcher->find(id), std::move(*rt));
  return DecodeAccepted{};
}

caf::behavior decode_worker(self_ptr self, node_context* ctx, std::string name,
                            model_settings model, decode_worker_settings settings) {
  auto& s = self->state;
  s.early = early_transfers<received_transfer>{settings.early};
  auto& batching = settings.batch;
  log_crashes(self, ctx, name);
  s.ctx = ctx;
  s.self_name = name;
  batching.node = ctx->node();
  s.batcher = std::make_unique<decode_batcher>(std::move(batching));
  // decode.corrupt_token: the token checker's negative control.
  s.batcher->set_token_filter(
      [ctx](engine::token t) { return ctx->faults().fire("decode.corrupt_token") ? t ^ 1 : t; });
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
            self->delayed_send(self, settings.sweep_interval, caf::tick_atom_v);
          },
          [=](remote_message& msg) -> caf::result<remote_message> {
            auto& s = self->state;
            return dispatch<decode_role>(
                *ctx, msg, [&](DecodeOrder& o) { return take_order(self, std::move(o)); },
                [&](LoadQuery&) {
                  const auto& b = *s.batcher;
                  WorkerLoad l;
                  l.set_role("decode");
                  l.set_queue_depth(static_cast<uint32_t>(b.queued()));
                  l.set_active(static_cast<uint32_t>(b.active()));
                  l.set_capacity(static_cast<uint32_t>(b.config().max_batch));
                  l.set_load(static_cast<double>(b.held()) / b.config().max_batch);
                  l.set_starting(!s.engine_ready);
                  return l;
                },
                [&](DecodeStatusQuery& q) {
                  DecodeStatus st;
                  if (auto held = s.batcher->find(q.request_id())) {
                    st.set_known(true);
                    st.set_sent(held->sent);
                  }
                  return st;
                },
                [&](Cancel& c) {
                  if (s.batcher->cancel(c.request_id())) {
                    act(self);
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
               auto model = worker_model(ctx.deployment(), p, name);
               auto settings = decode_settings_of(p);
               model.slots = static_cast<uint32_t>(settings.batch.max_batch);
               return ctx.system().spawn(decode_worker, &ctx, name, model, settings);
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

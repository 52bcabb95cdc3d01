// `prefill_worker`: prefills prompts on its engine and streams the KVCache, layer by
// layer as the engine produces it, over the data plane to the decode worker the
// gateway chose (serving.PrefillOrder → serving.PrefillDone).
//
// Ordering and ownership:
//  * orders queue (bounded by `max_queue`; beyond it: errc::overloaded) and run one
//    at a time on the engine's own thread (engine_runner), so the actor stays free
//    to answer LoadQuery and Cancel while a long prefill runs;
//  * admission: an order is refused (overloaded) when the queue is full, or when the
//    work queued ahead of it, at the engine's measured pace, would outlast its budget;
//  * the reply is sent when the *receiver confirmed* the whole transfer — success
//    means the decode worker holds the KV — or as an error when the transfer failed
//    (timeout, refused, cancelled): the gateway then fails over to local prefill;
//  * the transfer's chunks: every engine chunk in production order, then a final
//    chunk carrying serving.TransferMeta (first token, engine time);
//  * an order whose deadline passed while it queued is answered request_timeout
//    without computing.
//
// Its state and orders: prefill_state.hpp; cache moves (pulling a prefix from the
// worker holding it, serving such pulls): prefill_cache_moves.cpp.

#include <atomic>
#include <deque>
#include <span>

#include <caf/all.hpp>

#include "common/actor_inbox.hpp"
#include "common/crash_log.hpp"
#include "common/engine_runner.hpp"
#include "common/engine_setup.hpp"
#include "common/sampling_wire.hpp"
#include "common/worker_metrics.hpp"
#include "prefill/cache_move.hpp"
#include "prefill/kv_messages.hpp"
#include "prefill/prefill_settings.hpp"
#include "prefill/prefill_state.hpp"
#include "prefill/queue_view.hpp"
#include "prfaas/engine/block_hash.hpp"
#include "prefill/prefix_cache.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/peer_loss.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/prefill.pb.h"
#include "prfaas/wire/decode.pb.h"

namespace prfaas::serving {

using namespace prefill_detail;

namespace {
void start_next(self_ptr self, node_context* ctx, const std::string& name);
} // namespace

namespace prefill_detail {

/// Queues an order for the engine after its cache move (moved or given up).
void enqueue(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o) {
  self->state.queue.pull_ended(o->key); // (nothing if cancelled meanwhile)
  start_next(self, ctx, name);
}

} // namespace prefill_detail

namespace {

void update_gauges(self_ptr self) {
  auto& q = self->state.queue;
  self->state.stats->set(q.queued(), (q.running() ? 1 : 0) + q.transferring(), q.max_queue());
}

/// Drops the actor's record of an order the queue no longer holds.
void forget_if_gone(self_ptr self, const order_ptr& o) {
  if (!self->state.queue.contains(o->key))
    self->state.orders.erase(o->key);
}

void answer(self_ptr self, const order_ptr& o, caf::error e) {
  if (o->answered)
    return;
  o->answered = true;
  self->state.stats->failed.Increment();
  o->promise.deliver(std::move(e));
}

void start_next(self_ptr self, node_context* ctx, const std::string& name);

} // namespace

namespace prefill_detail {

uint64_t fence_mark(node_context* ctx, const order& o) {
  const auto& ep = *ctx->msgr().epochs();
  return ep.notices(o.origin) + ep.notices(o.po.decode_node());
}

bool is_stale(node_context* ctx, const order& o) {
  return o.dropped.load(std::memory_order_acquire) || fence_mark(ctx, o) != o.fence_mark;
}

void drop_orders_of(self_ptr self, node_context* ctx, const std::string& name,
                    const std::string& peer, const std::string& why) {
  auto& s = self->state;
  std::vector<order_ptr> stale;
  for (auto& [k, o] : s.orders)
    if (!o->answered && (o->origin == peer || o->po.decode_node() == peer))
      stale.push_back(o);
  for (auto& o : stale) {
    o->dropped.store(true, std::memory_order_release);
    auto acts = s.queue.cancel(o->po.request_id(), o->po.transfer_id());
    for (auto k : acts.removed)
      s.orders.erase(k);
    for ([[maybe_unused]] auto k : acts.cancel_transfer)
      ctx->data()->cancel(o->po.transfer_id()); // its end answers the order
    answer(self, o,
           make_error(errc::peer_down,
                      "prefill of " + o->po.request_id() + " dropped: " + peer + " " + why));
    ctx->log()->warn("prefill_order_dropped worker={} request={} transfer={} peer={} reason=\"{}\"",
                     name, o->po.request_id(), o->po.transfer_id(), peer, why);
  }
  if (!stale.empty()) {
    ctx->node_metrics()
        .counter("prfaas_prefill_stale_orders_total",
                 "prefill orders dropped undelivered because their gateway or decode node gave "
                 "them up (it declared this node down, or went down itself)",
                 {{"worker", name}})
        .Increment(static_cast<double>(stale.size()));
    ctx->probe("prefill.stale_dropped");
  }
  update_gauges(self);
  start_next(self, ctx, name);
}

} // namespace prefill_detail

namespace {

/// Tells the KV directory what the prefix cache stored and evicted (one-way; the
/// directory is soft state and asks for everything again when it needs to).
void announce(self_ptr self, node_context* ctx, const std::string& name,
              const std::vector<engine::pool_event>& events) {
  auto& s = self->state;
  if (s.directory.node.empty() || events.empty())
    return;
  directory::BlocksStored stored;
  directory::BlocksEvicted evicted;
  for (auto& ev : events) {
    if (ev.key.kind != engine::entry_kind::kv)
      continue;
    if (ev.what == engine::pool_event::type::stored) {
      auto* chain = stored.add_chains();
      if (ev.parent)
        chain->set_parent(*ev.parent);
      chain->add_block_ids(ev.key.id);
    } else {
      evicted.add_block_ids(ev.key.id);
    }
  }
  const auto dir = role_ref<kv_directory_role>(*ctx, name, s.directory);
  if (stored.chains_size() > 0) {
    stored.set_node(ctx->node());
    stored.set_actor(name);
    stored.set_cluster(ctx->cluster());
    stored.set_epoch(s.epoch);
    dir.send(stored);
  }
  if (evicted.block_ids_size() > 0) {
    evicted.set_node(ctx->node());
    evicted.set_actor(name);
    evicted.set_cluster(ctx->cluster());
    evicted.set_epoch(s.epoch);
    dir.send(evicted);
  }
}

/// The transfer of `o` ended (data-plane thread → here through the inbox).
void transfer_ended(self_ptr self, const order_ptr& o, const transfer_outcome& out,
                    uint64_t queue_ns) {
  self->state.queue.transfer_ended(o->key);
  forget_if_gone(self, o);
  update_gauges(self);
  if (o->answered)
    return;
  if (!out.ok) {
    self->state.ctx->probe("data.transfer_failed");
    answer(self, o,
           make_error(errc::unreachable, "kv transfer " + std::to_string(out.id) + " to " +
                                             o->po.decode_node() + " failed: " + out.error));
    return;
  }
  PrefillDone done;
  done.set_retransmits(out.stats.retransmits);
  done.set_queue_ns(queue_ns);
  o->answered = true;
  self->state.stats->ok.Increment();
  o->promise.deliver(done);
}

void run(self_ptr self, node_context* ctx, const std::string& name, order_ptr o) {
  auto* dp = ctx->data();
  const uint64_t tid = o->po.transfer_id();
  const auto started = self->clock().now();
  const auto queue_ns = static_cast<uint64_t>((started - o->enqueued).count());
  TransferMeta head;
  head.set_request_id(o->po.request_id());
  update_gauges(self);
  dp->open(tid, o->po.decode_node(), o->po.decode_sink(), head.SerializeAsString(),
           [inbox = self->state.inbox, self, o, queue_ns](transfer_outcome out) {
             inbox->post([self, o, out = std::move(out), queue_ns] {
               transfer_ended(self, o, out, queue_ns);
             });
           });
  const uint64_t seq = self->state.next_seq++;
  auto* runner = self->state.runner.get();
  runner->post([inbox = self->state.inbox, self, ctx, name, o, dp, tid, seq, head, runner,
                cache = self->state.cache, cache_events = self->state.cache_events,
                group = self->state.layers_per_push, wait = self->state.pool_wait,
                cap = ctx->deployment().data_plane.max_chunk_bytes](engine::engine& e) mutable {
    // Chunks go out `group` at a time, in pool buffers (kv_messages.hpp); none once the
    // order is stale (fencing: checked per message, the actor may not know yet).
    kv_messages messages{*dp,
                         tid,
                         group,
                         cap,
                         std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                         [ctx, o] { return is_stale(ctx, *o); }};
    auto send = [&](const engine::kv_chunk& c) { messages.add(c); };
    // The order is not changed once queued: the engine reads its prompt in place.
    const std::span<const engine::token> prompt(o->po.prompt().data(),
                                                static_cast<size_t>(o->po.prompt_size()));
    engine::prefill_request req;
    req.id = seq;
    req.prompt = prompt;
    req.sampling = from_wire(o->po.sampling());
    const auto t0 = runner->now(); // the engine's time: virtual in simulation
    prefix_cache::lookup hit;
    if (cache) {
      hit = cache->acquire(prompt);
      req.reuse = hit.reuse;
      req.reuse_tokens = hit.reuse_tokens(cache->block_tokens());
      req.checkpoint_interval = cache->checkpoint_interval();
      // The decode worker needs the whole KV: the reused prefix's full-attention
      // blocks travel too (the engine only emits what it computes).
      for (auto& c : hit.reuse)
        if (c.header.kind == engine::layer_kind::full)
          send(c);
    }
    auto r = e.prefill(req, [&](engine::kv_chunk&& c) { send(c); });
    messages.flush();
    if (auto n = messages.unpooled(); n > 0)
      ctx->node_metrics()
          .counter("prfaas_prefill_unpooled_messages_total",
                   "KV messages built outside the send pool (larger than a pool buffer, or "
                   "no buffer came back within 200 ms)",
                   {{"worker", name}})
          .Increment(static_cast<double>(n));
    const auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(runner->now() - t0).count());
    std::string error = r ? "dropped as stale (fencing)" : r.message();
    if (r && !messages.stale()) {
      head.set_first_token(r->first_token);
      if (r->first_logprobs)
        to_wire(*r->first_logprobs, *head.mutable_first_logprobs());
      head.set_engine_ns(ns);
      head.set_computed_tokens(r->computed_tokens);
      auto bytes = head.SerializeAsString();
      std::vector<std::byte> last(bytes.size());
      std::memcpy(last.data(), bytes.data(), bytes.size());
      dp->push(tid, std::move(last));
      dp->finish(tid);
      error.clear();
    } else {
      dp->cancel(tid);
    }
    // Caching the new blocks comes after the transfer is complete on our side: it is
    // not on the request's path to its first token.
    std::vector<engine::pool_event> changes;
    if (cache) {
      if (r)
        cache->publish(e, seq, hit);
      cache->release(hit);
      changes.swap(*cache_events); // engine thread: the only one touching it
    }
    e.release(seq);
    inbox->post([self, ctx, name, o, error, computed = r ? r->computed_tokens : 0u, ns,
                 changes = std::move(changes), counters = e.counters()] {
      self->state.stats->engine_counters(counters);
      announce(self, ctx, name, changes);
      self->state.queue.engine_done(o->key, computed, std::chrono::nanoseconds(ns), error.empty());
      forget_if_gone(self, o);
      if (error.empty())
        self->state.stats->prefill_done(ns, computed, o->po.prompt_size());
      else
        answer(self, o,
               make_error(errc::bad_request,
                          "prefill of " + o->po.request_id() + " failed: " + error));
      update_gauges(self);
      start_next(self, ctx, name);
    });
  });
}

void start_next(self_ptr self, node_context* ctx, const std::string& name) {
  auto& s = self->state;
  if (s.ready) {
    auto step = s.queue.next(self->clock().now());
    for (auto k : step.expired) {
      auto o = s.orders.at(k);
      s.orders.erase(k);
      answer(self, o,
             make_error(errc::request_timeout,
                        "prefill of " + o->po.request_id() + " not started before its deadline"));
    }
    if (step.start)
      run(self, ctx, name, s.orders.at(*step.start));
  }
  update_gauges(self);
}

/// A new epoch for this worker's reports: above any of an earlier life of the worker
/// (the directory replaces what it had from a worker when the epoch rises). Wall-clock
/// nanoseconds live; in a simulation the virtual clock, so that nothing in a run reads
/// the wall clock. A restart at the same instant (virtual time stands still while a
/// supervisor restarts an actor) still gets a higher epoch: epochs given out in this
/// process only rise.
uint64_t epoch_now(self_ptr self) {
  static std::atomic<uint64_t> last{0};
  const auto since = virtual_time(self->system())
                         ? self->clock().now().time_since_epoch()
                         : std::chrono::system_clock::now().time_since_epoch();
  const auto now =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(since).count());
  uint64_t prev = last.load();
  uint64_t next;
  do
    next = std::max(prev + 1, now);
  while (!last.compare_exchange_weak(prev, next));
  return next;
}

/// An admitted order, recorded (under its queue key) with what answering it needs.
order_ptr new_order(self_ptr self, node_context* ctx, const remote_message& msg, PrefillOrder po,
                    prefill_queue::key key, std::chrono::nanoseconds budget) {
  auto o = std::make_shared<order>();
  o->key = key;
  o->promise = reply_promise<PrefillDone>(self, msg);
  o->enqueued = self->clock().now();
  o->deadline = o->enqueued + budget;
  o->po = std::move(po);
  o->origin = msg.source.node; // its gateway: fencing drops it if that node gives it up
  o->fence_mark = fence_mark(ctx, *o);
  self->state.orders.emplace(o->key, o);
  return o;
}

caf::behavior prefill_worker(self_ptr self, node_context* ctx, std::string name,
                             model_settings model, prefill_settings cfg, address directory_addr) {
  auto& s = self->state;
  log_crashes(self, ctx, name);
  s.queue = prefill_queue{cfg.max_queue};
  s.pull_timeout = cfg.pull_timeout;
  s.layers_per_push = cfg.layers_per_push;
  s.pool_wait = cfg.pool_wait;
  if (cfg.cache_blocks > 0) {
    s.cache_events = std::make_shared<std::vector<engine::pool_event>>();
    s.cache = std::make_shared<prefix_cache>(
        model.block_tokens, cfg.cache_blocks,
        [events = s.cache_events](const engine::pool_event& ev) { events->push_back(ev); },
        cfg.checkpoint_blocks);
  }
  s.directory = directory_addr;
  s.epoch = epoch_now(self);
  s.inbox = std::make_shared<actor_inbox>(self);
  s.stats = std::make_unique<worker_metrics>(ctx->node_metrics(), name, "prefill");
  if (!ctx->data())
    throw std::runtime_error("prefill_worker " + name + ": node " + ctx->node() +
                             " has no data endpoint (nodes[].data) for the KV data plane");
  if (auto* fabric = sim_fabric_of(ctx->data())) // simulated link: count the profiled bytes
    fabric->set_wire_size(wire_size_of(model));
  s.ctx = ctx;
  s.runner = std::make_unique<engine_runner>(
      ctx->system(), [model, name](engine::clock& c) { return make_engine(model, name, c); },
      "pf." + name, engine_runner::crash(s.inbox));
  auto ready = [self, ctx, name, engine_name = model.engine](const engine::model_info& info) {
    auto& s = self->state;
    s.ready = true;
    s.stats->ready.Set(1);
    if (s.cache) { // cache moves from other workers land here
      s.cache_sink = name + ".cache";
      ctx->data()->add_sink(s.cache_sink, [inbox = s.inbox, self, ctx, name](received_transfer rt) {
        inbox->post([self, ctx, name, rt = std::move(rt)]() mutable {
          cache_arrived(self, ctx, name, std::move(rt));
        });
      });
    }
    ctx->log()->info("prefill_worker_started name={} engine={} model={}", name, engine_name,
                     info.model);
    start_next(self, ctx, name);
  };
  s.runner->when_ready(s.inbox, ready);
  update_gauges(self);
  auto lost = [=](const std::string& peer, const std::string& why) {
    drop_orders_of(self, ctx, name, peer, why);
  };
  return on_peer_lost(self, *ctx, lost)
      .or_else(caf::behavior{
          [=](wake_atom) { self->state.inbox->drain(); },
          [=](caf::timeout_atom, uint64_t tid) { end_pull(self, ctx, name, tid, "timed out"); },
          [=](remote_message& msg) -> caf::result<remote_message> {
            auto& s = self->state;
            return dispatch<prefill_role>(
                *ctx, msg,
                [&](PrefillOrder& po) -> prfaas::answer<PrefillDone> {
                  if (po.prompt_size() == 0 || po.decode_node().empty() || po.decode_sink().empty())
                    return make_error(errc::bad_request,
                                      "PrefillOrder " + po.request_id() +
                                          ": needs a prompt, decode_node and decode_sink");
                  if (ctx->faults().fire("prefill.crash"))
                    throw std::runtime_error("fault point prefill.crash: crashing on order " +
                                             po.request_id());
                  const auto budget =
                      std::chrono::nanoseconds(po.budget_ns() ? po.budget_ns() : 60'000'000'000ull);
                  const bool pull_first =
                      s.cache && !po.cache_from_node().empty() && po.cache_blocks() > 0;
                  auto admitted = s.queue.admit(
                      queue_order(ctx->deployment(), po, self->clock().now(), budget, pull_first));
                  if (auto* no = std::get_if<prefill_queue::refusal>(&admitted)) {
                    s.stats->rejected.Increment();
                    return make_error(errc::overloaded, "prefill worker " + name + ": " + no->why);
                  }
                  auto o = new_order(self, ctx, msg, std::move(po),
                                     std::get<prefill_queue::key>(admitted), budget);
                  auto promise = o->promise;
                  if (pull_first)
                    pull_cache(self, ctx, name, o);
                  else
                    start_next(self, ctx, name);
                  return promise;
                },
                [&](directory::Reannounce&) {
                  // Everything the cache holds, at a new epoch (it replaces what the directory
                  // had from us). Read on the engine thread, answered from here.
                  s.epoch = std::max(s.epoch + 1, epoch_now(self));
                  reply_promise<directory::BlocksStored> rp(self, msg);
                  directory::BlocksStored all;
                  all.set_node(ctx->node());
                  all.set_actor(name);
                  all.set_cluster(ctx->cluster());
                  all.set_epoch(s.epoch);
                  if (!s.cache) {
                    rp.deliver(all);
                    return rp;
                  }
                  s.runner->post([inbox = s.inbox, all, rp, cache = s.cache,
                                  events = s.cache_events](engine::engine&) mutable {
                    for (auto& [id, parent] : cache->kv_blocks()) {
                      auto* chain = all.add_chains();
                      if (parent)
                        chain->set_parent(*parent);
                      chain->add_block_ids(id);
                    }
                    events->clear(); // covered by this full report
                    inbox->post([rp, all]() mutable { rp.deliver(all); });
                  });
                  return rp;
                },
                [&](LoadQuery&) { return load_of(s.queue, s.ready, ctx->deployment()); },
                [&](CachePull& q, remote_message& m) { return serve_pull(self, ctx, m, q); },
                [&](Cancel& c) {
                  ctx->probe("prefill.cancelled");
                  auto acts = s.queue.cancel(c.request_id(), c.transfer_id());
                  for (auto k : acts.removed) {
                    auto o = s.orders.at(k);
                    s.orders.erase(k);
                    answer(self, o, make_error(errc::cancelled, "cancelled: " + c.reason()));
                  }
                  for (auto k : acts.cancel_transfer)
                    ctx->data()->cancel(
                        s.orders.at(k)->po.transfer_id()); // its `done` answers the order
                  update_gauges(self);
                });
          },
      });
}

address directory_of(const node_context& ctx, const std::string& text) {
  address a;
  if (text.empty())
    return a;
  if (!address::parse(text, a))
    a = ctx.local(text);
  return a;
}

void register_types(actor_registry& r) {
  r.add({.name = "prefill_worker",
         .doc = "prefills prompts on an engine and streams the KVCache to decode workers",
         .params = prefill_params(),
         .factory =
             [](node_context& ctx, const std::string& name, const actor_params& p) {
               auto model = read_model(ctx.deployment(), p.str("profile"), name);
               auto cfg = prefill_settings_of(p);
               auto directory = directory_of(ctx, cfg.directory);
               return ctx.system().spawn(prefill_worker, &ctx, name, model, cfg, directory);
             },
         .check = check_prefill_params,
         .check_deployment = check_worker_model});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

// Its rare paths (a chaos run shows which it took) and its fault points.
PRFAAS_REGISTER_PROBES(prefill,
                       {"prefill.cancelled",
                        "a prefill order was cancelled (failover or resume elsewhere)"},
                       {"prefill.stale_dropped",
                        "prefill orders were dropped undelivered: their gateway or decode node "
                        "went down or declared this node down"})
PRFAAS_REGISTER_FAULT_POINTS(
    prefill,
    {"prefill.crash",
     "a prefill worker crashes (throws) on taking a PrefillOrder; its supervisor restarts it"})

} // namespace prfaas::serving

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

namespace prefill_detail {

/// Queues an order for the engine after its cache move (moved or given up).
void enqueue(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o) {
  self->state.queue.pull_ended(o->key); // (nothing if cancelled meanwhile)
  start_next(self, ctx, name);
}

void update_gauges(self_ptr self) {
  auto& q = self->state.queue;
  self->state.stats->set(q.queued(), q.running() + q.transferring(), q.max_queue());
}

/// Drops the actor's record of an order the queue no longer holds.
void forget_if_gone(self_ptr self, const order_ptr& o) {
  if (!self->state.queue.contains(o->key))
    self->state.orders.erase(o->key);
}

/// Counts and logs an order that ends undelivered because a peer gave it up.
void note_stale(self_ptr self, const order& o, const std::string& peer, const std::string& why) {
  auto* ctx = self->state.ctx;
  const auto& name = self->state.worker;
  ctx->log()->warn("prefill_order_dropped worker={} request={} transfer={} peer={} reason=\"{}\"",
                   name, o.po.request_id(), o.po.transfer_id(), peer, why);
  ctx->node_metrics()
      .counter("prfaas_prefill_stale_orders_total",
               "prefill orders dropped undelivered because their gateway or decode node gave "
               "them up (it declared this node down, or went down itself)",
               {{"worker", name}})
      .Increment();
  ctx->probe("prefill.stale_dropped");
}

/// Answers `o` with a failure, once. An order that ends so while it is stale (fencing)
/// is counted and logged as dropped whichever path ends it first: the peer-loss notice
/// (`peer`, `why`), its transfer failing at the peer, or the engine thread's own check.
void answer(self_ptr self, const order_ptr& o, caf::error e, const std::string& peer,
            const std::string& why) {
  if (o->answered)
    return;
  o->answered = true;
  self->state.stats->failed.Increment();
  if (auto* ctx = self->state.ctx; ctx && prefill_detail::is_stale(ctx, *o)) {
    if (!peer.empty())
      note_stale(self, *o, peer, why);
    else
      note_stale(self, *o,
                 o->origin == o->po.decode_node() ? o->origin
                                                  : o->origin + "," + o->po.decode_node(),
                 "declared this node down");
  }
  o->promise.deliver(std::move(e));
}

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
      ctx->data()->cancel(o->po.transfer_id()); // its end finds the order answered
    answer(self, o,
           make_error(errc::peer_down,
                      "prefill of " + o->po.request_id() + " dropped: " + peer + " " + why),
           peer, why);
  }
  update_gauges(self);
  start_next(self, ctx, name);
}

void start_next(self_ptr self, node_context* ctx, const std::string& name) {
  auto& s = self->state;
  if (s.ready) {
    auto step = s.queue.next(self->clock().now(), s.batch);
    for (auto k : step.expired) {
      auto o = s.orders.at(k);
      s.orders.erase(k);
      answer(self, o,
             make_error(errc::request_timeout,
                        "prefill of " + o->po.request_id() + " not started before its deadline"));
    }
    if (!step.start.empty()) {
      std::vector<order_ptr> batch;
      for (auto k : step.start)
        batch.push_back(s.orders.at(k));
      run(self, ctx, name, std::move(batch));
    }
  }
  update_gauges(self);
}

} // namespace prefill_detail

namespace {

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

/// The worker's state from its settings: queue, prefix cache, metrics, engine runner.
void set_up(self_ptr self, node_context* ctx, const std::string& name, const model_settings& model,
            const prefill_settings& cfg, const address& directory_addr) {
  auto& s = self->state;
  s.queue = prefill_queue{cfg.max_queue};
  s.pull_timeout = cfg.pull_timeout;
  s.layers_per_push = cfg.layers_per_push;
  s.pool_wait = cfg.pool_wait;
  s.max_batch = cfg.max_batch;
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
  s.worker = name;
  s.runner = std::make_unique<engine_runner>(
      ctx->system(), [model, name](engine::clock& c) { return make_engine(model, name, c); },
      "pf." + name, engine_runner::crash(s.inbox));
}

/// The engine is built: orders may run, and cache moves from other workers land here.
void on_ready(self_ptr self, node_context* ctx, const std::string& name,
              const std::string& engine_name, const engine::model_info& info) {
  auto& s = self->state;
  s.ready = true;
  s.stats->ready.Set(1);
  if (info.prefill_batch_tokens > 0) // the engine computes several prompts together
    s.batch = {.orders = s.max_batch, .tokens = info.prefill_batch_tokens};
  if (s.cache) {
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
}

/// A PrefillOrder: admitted into the queue (or refused), then run or first moved into
/// the cache; answered when its transfer ends.
prfaas::answer<PrefillDone> take_order(self_ptr self, node_context* ctx, const std::string& name,
                                       const remote_message& msg, PrefillOrder& po,
                                       duration default_budget) {
  auto& s = self->state;
  if (po.prompt_size() == 0 || po.decode_node().empty() || po.decode_sink().empty())
    return make_error(errc::bad_request, "PrefillOrder " + po.request_id() +
                                             ": needs a prompt, decode_node and decode_sink");
  if (ctx->faults().fire("prefill.crash"))
    throw std::runtime_error("fault point prefill.crash: crashing on order " + po.request_id());
  const auto budget = po.budget_ns() ? std::chrono::nanoseconds(po.budget_ns()) : default_budget;
  const bool pull_first = s.cache && !po.cache_from_node().empty() && po.cache_blocks() > 0;
  auto admitted = s.queue.admit(
      queue_order(ctx->deployment(), ctx->cluster(), po, self->clock().now(), budget, pull_first));
  if (auto* no = std::get_if<prefill_queue::refusal>(&admitted)) {
    s.stats->rejected.Increment();
    return make_error(errc::overloaded, "prefill worker " + name + ": " + no->why);
  }
  auto o = new_order(self, ctx, msg, std::move(po), std::get<prefill_queue::key>(admitted), budget);
  auto promise = o->promise;
  if (pull_first)
    pull_cache(self, ctx, name, o);
  else
    start_next(self, ctx, name);
  return promise;
}

/// Everything the cache holds, at a new epoch (it replaces what the directory had from
/// this worker). Read on the engine thread, answered from the actor.
reply_promise<directory::BlocksStored>
reannounce(self_ptr self, node_context* ctx, const std::string& name, const remote_message& msg) {
  auto& s = self->state;
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
}

/// The gateway gave a request up (failover, resume elsewhere): queued orders of it are
/// answered cancelled, a running one has its transfer cancelled (its end answers it).
void cancel(self_ptr self, node_context* ctx, const Cancel& c) {
  auto& s = self->state;
  ctx->probe("prefill.cancelled");
  auto acts = s.queue.cancel(c.request_id(), c.transfer_id());
  for (auto k : acts.removed) {
    auto o = s.orders.at(k);
    s.orders.erase(k);
    answer(self, o, make_error(errc::cancelled, "cancelled: " + c.reason()));
  }
  for (auto k : acts.cancel_transfer)
    ctx->data()->cancel(s.orders.at(k)->po.transfer_id());
  update_gauges(self);
}

caf::behavior prefill_worker(self_ptr self, node_context* ctx, std::string name,
                             model_settings model, prefill_settings cfg, address directory_addr) {
  log_crashes(self, ctx, name);
  set_up(self, ctx, name, model, cfg, directory_addr);
  self->state.runner->when_ready(self->state.inbox, [self, ctx, name, engine_name = model.engine](
                                                        const engine::model_info& i) {
    on_ready(self, ctx, name, engine_name, i);
  });
  update_gauges(self);
  auto lost = [=](const std::string& peer, const std::string& why) {
    drop_orders_of(self, ctx, name, peer, why);
  };
  const duration default_budget = std::chrono::seconds(60);
  return on_peer_lost(self, *ctx, lost)
      .or_else(caf::behavior{
          [=](wake_atom) { self->state.inbox->drain(); },
          [=](caf::timeout_atom, uint64_t tid) { end_pull(self, ctx, name, tid, "timed out"); },
          [=](remote_message& msg) -> caf::result<remote_message> {
            auto& s = self->state;
            return dispatch<prefill_role>(
                *ctx, msg,
                [&](PrefillOrder& po) {
                  return take_order(self, ctx, name, msg, po, default_budget);
                },
                [&](directory::Reannounce&) { return reannounce(self, ctx, name, msg); },
                [&](LoadQuery&) {
                  return load_of(s.queue, s.ready, ctx->deployment(), ctx->cluster());
                },
                [&](CachePull& q, remote_message& m) { return serve_pull(self, ctx, m, q); },
                [&](Cancel& c) { cancel(self, ctx, c); });
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
               auto model = worker_model(ctx.deployment(), p, name);
               auto cfg = prefill_settings_of(p);
               model.slots = cfg.max_batch; // a sequence per prompt prefilled together
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

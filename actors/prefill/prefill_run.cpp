// The prefill worker running its orders (prefill_worker.cpp is the actor), one or a
// batch the engine computes together (prefill_queue's batch_limit): the engine computes
// them on its own thread, each one's KV chunks stream to its decode worker over the data
// plane as the engine produces them, its last chunk carries serving.TransferMeta (first
// token, engine time), and each order is answered when its receiver confirmed the whole
// transfer (or with the error that ended it). The prefix cache's changes go to the KV
// directory afterwards, off the request's path.

#include <cstring>
#include <span>

#include "common/sampling_wire.hpp"
#include "prefill/kv_messages.hpp"
#include "prefill/prefill_state.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/wire/decode.pb.h"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas::serving::prefill_detail {

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
  auto send = [&](auto& report) { // from this worker, at its epoch
    report.set_node(ctx->node());
    report.set_actor(name);
    report.set_cluster(ctx->cluster());
    report.set_epoch(s.epoch);
    dir.send(report);
  };
  if (stored.chains_size() > 0)
    send(stored);
  if (evicted.block_ids_size() > 0)
    send(evicted);
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
           make_error(errc::transfer_failed, "kv transfer " + std::to_string(out.id) + " to " +
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

/// One order of a batch, as the engine thread sees it.
struct job_order {
  order_ptr o;
  uint64_t tid = 0; ///< its transfer
  uint64_t seq = 0; ///< the engine's sequence id for it
  TransferMeta head;
};

/// What the engine thread reports of one order.
struct order_outcome {
  order_ptr o;
  std::string error; ///< empty: computed and delivered on our side
  uint32_t computed = 0;
};

/// The engine thread's part of a batch of orders (one, or several the engine computes
/// together): compute them in one prefill_batch call, stream each one's chunks, close or
/// cancel each transfer, then cache their blocks; the actor is told through its inbox.
struct prefill_job {
  self_ptr self;
  node_context* ctx;
  std::string name;
  std::vector<job_order> orders;
  data_plane* dp;
  engine_runner* runner;
  std::shared_ptr<actor_inbox> inbox;
  std::shared_ptr<prefix_cache> cache;
  std::shared_ptr<std::vector<engine::pool_event>> cache_events;
  uint32_t group = 1; ///< layers per data-plane push
  duration pool_wait{};
  size_t max_chunk_bytes = 0;

  void operator()(engine::engine& e);

private:
  /// The order's request, its prefix cache hit taken (whose reused full-attention
  /// chunks go out first: the decode worker needs the whole KV, and the engine only
  /// emits what it computes).
  engine::prefill_request request(const job_order& j, kv_messages& messages,
                                  prefix_cache::lookup& hit) const;
  /// The transfer's last chunk (TransferMeta) and its end; or its cancellation. Returns
  /// why nothing was delivered (empty when it was).
  std::string close(job_order& j, const engine::result<engine::prefill_result>& r,
                    const kv_messages& messages, uint64_t ns) const;
};

engine::prefill_request prefill_job::request(const job_order& j, kv_messages& messages,
                                             prefix_cache::lookup& hit) const {
  // The order is not changed once queued: the engine reads its prompt in place.
  const std::span<const engine::token> prompt(j.o->po.prompt().data(),
                                              static_cast<size_t>(j.o->po.prompt_size()));
  engine::prefill_request req;
  req.id = j.seq;
  req.prompt = prompt;
  req.sampling = from_wire(j.o->po.sampling());
  if (cache) {
    hit = cache->acquire(prompt);
    req.reuse = hit.reuse;
    req.reuse_tokens = hit.reuse_tokens(cache->block_tokens());
    req.checkpoint_interval = cache->checkpoint_interval();
    for (auto& c : hit.reuse)
      if (c.header.kind == engine::layer_kind::full)
        messages.add(c);
  }
  return req;
}

std::string prefill_job::close(job_order& j, const engine::result<engine::prefill_result>& r,
                               const kv_messages& messages, uint64_t ns) const {
  if (!r || messages.stale()) {
    dp->cancel(j.tid);
    return r ? "dropped as stale (fencing)" : r.message();
  }
  j.head.set_first_token(r->first_token);
  if (r->first_logprobs)
    to_wire(*r->first_logprobs, *j.head.mutable_first_logprobs());
  j.head.set_engine_ns(ns);
  j.head.set_computed_tokens(r->computed_tokens);
  auto bytes = j.head.SerializeAsString();
  std::vector<std::byte> last(bytes.size());
  std::memcpy(last.data(), bytes.data(), bytes.size());
  dp->push(j.tid, std::move(last));
  dp->finish(j.tid);
  return {};
}

/// The engine is done with a batch (actor thread): its figures, its cache's changes to
/// the directory, the answers of the orders that failed, and the next batch. Each order
/// counts towards the queue's pace with its share of the batch's time.
void engine_done(self_ptr self, node_context* ctx, const std::string& name,
                 const std::vector<order_outcome>& outcomes, uint64_t ns,
                 const std::vector<engine::pool_event>& changes) {
  announce(self, ctx, name, changes);
  uint64_t total = 0;
  for (auto& out : outcomes)
    total += out.computed;
  for (auto& [o, error, computed] : outcomes) {
    const uint64_t share = total > 0 ? ns * computed / total : ns;
    self->state.queue.engine_done(o->key, computed, std::chrono::nanoseconds(share), error.empty());
    forget_if_gone(self, o);
    if (error.empty())
      self->state.stats->prefill_done(ns, computed, o->po.prompt_size());
    else
      answer(
          self, o,
          make_error(errc::bad_request, "prefill of " + o->po.request_id() + " failed: " + error));
  }
  update_gauges(self);
  start_next(self, ctx, name);
}

void prefill_job::operator()(engine::engine& e) {
  // Chunks go out `group` at a time, in pool buffers (kv_messages.hpp); none once an
  // order is stale (fencing: checked per message, the actor may not know yet).
  const size_t n = orders.size();
  std::vector<std::unique_ptr<kv_messages>> messages;
  std::vector<prefix_cache::lookup> hits(n);
  std::vector<engine::prefill_request> reqs;
  std::vector<engine::chunk_sink> sinks;
  const auto t0 = runner->now(); // the engine's time: virtual in simulation
  for (size_t i = 0; i < n; ++i) {
    messages.push_back(std::make_unique<kv_messages>(
        *dp, orders[i].tid, group, max_chunk_bytes,
        std::chrono::duration_cast<std::chrono::milliseconds>(pool_wait),
        [ctx = ctx, o = orders[i].o] { return is_stale(ctx, *o); }));
    reqs.push_back(request(orders[i], *messages[i], hits[i]));
    sinks.push_back([m = messages[i].get()](engine::kv_chunk&& c) { m->add(c); });
  }
  // Each order's transfer closes as soon as the engine is done with it, not when the
  // whole batch is: a transfer left open holds receive credit at the decode worker
  // that the batch's other transfers wait for.
  std::vector<std::string> errors(n);
  std::vector<bool> closed(n, false);
  auto close_one = [&](size_t i, const engine::result<engine::prefill_result>& r) {
    if (i >= n || closed[i])
      return;
    closed[i] = true;
    messages[i]->flush();
    const auto ns_i = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(runner->now() - t0).count());
    errors[i] = close(orders[i], r, *messages[i], ns_i);
  };
  auto results = e.prefill_batch(reqs, sinks, close_one);
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(runner->now() - t0).count());
  std::vector<order_outcome> outcomes;
  uint64_t unpooled = 0;
  for (size_t i = 0; i < n; ++i) {
    close_one(i, results[i]); // an engine that did not report it
    unpooled += messages[i]->unpooled();
    const auto& r = results[i];
    outcomes.push_back({orders[i].o, errors[i], r ? r->computed_tokens : 0u});
  }
  if (unpooled > 0)
    ctx->node_metrics()
        .counter("prfaas_prefill_unpooled_messages_total",
                 "KV messages built outside the send pool (larger than a pool buffer, or "
                 "no buffer came back within 200 ms)",
                 {{"worker", name}})
        .Increment(static_cast<double>(unpooled));
  // Caching the new blocks comes after the transfers are complete on our side: it is
  // not on the requests' path to their first tokens.
  std::vector<engine::pool_event> changes;
  if (cache) {
    for (size_t i = 0; i < n; ++i) {
      if (results[i])
        cache->publish(e, orders[i].seq, hits[i]);
      cache->release(hits[i]);
    }
    changes.swap(*cache_events); // engine thread: the only one touching it
  }
  for (auto& j : orders)
    e.release(j.seq);
  inbox->post([self = self, ctx = ctx, name = name, outcomes = std::move(outcomes), ns,
               changes = std::move(changes), counters = e.counters()] {
    self->state.stats->engine_counters(counters);
    engine_done(self, ctx, name, outcomes, ns, changes);
  });
}

} // namespace

void run(self_ptr self, node_context* ctx, const std::string& name, std::vector<order_ptr> batch) {
  auto& s = self->state;
  auto* dp = ctx->data();
  prefill_job job{.self = self,
                  .ctx = ctx,
                  .name = name,
                  .orders = {},
                  .dp = dp,
                  .runner = s.runner.get(),
                  .inbox = s.inbox,
                  .cache = s.cache,
                  .cache_events = s.cache_events,
                  .group = s.layers_per_push,
                  .pool_wait = s.pool_wait,
                  .max_chunk_bytes = ctx->deployment().data_plane.max_chunk_bytes};
  for (auto& o : batch) {
    const uint64_t tid = o->po.transfer_id();
    const auto queue_ns = static_cast<uint64_t>((self->clock().now() - o->enqueued).count());
    TransferMeta head;
    head.set_request_id(o->po.request_id());
    dp->open(tid, o->po.decode_node(), o->po.decode_sink(), head.SerializeAsString(),
             [inbox = s.inbox, self, o, queue_ns](transfer_outcome out) {
               inbox->post([self, o, out = std::move(out), queue_ns] {
                 transfer_ended(self, o, out, queue_ns);
               });
             });
    job.orders.push_back({.o = o, .tid = tid, .seq = s.next_seq++, .head = std::move(head)});
  }
  update_gauges(self);
  s.runner->post(std::move(job));
}

} // namespace prfaas::serving::prefill_detail

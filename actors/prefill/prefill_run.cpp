// The prefill worker running one order (prefill_worker.cpp is the actor): the engine
// computes it on its own thread, its KV chunks stream to the decode worker over the data
// plane as the engine produces them, the last chunk carries serving.TransferMeta (first
// token, engine time), and the order is answered when the receiver confirmed the whole
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

/// The engine thread's part of one order: compute it, stream its chunks, close or
/// cancel its transfer, then cache its blocks; the actor is told through its inbox.
struct prefill_job {
  self_ptr self;
  node_context* ctx;
  std::string name;
  order_ptr o;
  data_plane* dp;
  uint64_t tid = 0;
  uint64_t seq = 0; ///< the engine's sequence id for it
  TransferMeta head;
  engine_runner* runner;
  std::shared_ptr<actor_inbox> inbox;
  std::shared_ptr<prefix_cache> cache;
  std::shared_ptr<std::vector<engine::pool_event>> cache_events;
  uint32_t group = 1; ///< layers per data-plane push
  duration pool_wait{};
  size_t max_chunk_bytes = 0;

  void operator()(engine::engine& e);

private:
  engine::result<engine::prefill_result> compute(engine::engine& e, kv_messages& messages,
                                                 prefix_cache::lookup& hit) const;
  /// The transfer's last chunk (TransferMeta) and its end; or its cancellation. Returns
  /// why nothing was delivered (empty when it was).
  std::string close(const engine::result<engine::prefill_result>& r, const kv_messages& messages,
                    uint64_t ns);
};

engine::result<engine::prefill_result>
prefill_job::compute(engine::engine& e, kv_messages& messages, prefix_cache::lookup& hit) const {
  auto send = [&](const engine::kv_chunk& c) { messages.add(c); };
  // The order is not changed once queued: the engine reads its prompt in place.
  const std::span<const engine::token> prompt(o->po.prompt().data(),
                                              static_cast<size_t>(o->po.prompt_size()));
  engine::prefill_request req;
  req.id = seq;
  req.prompt = prompt;
  req.sampling = from_wire(o->po.sampling());
  if (cache) {
    hit = cache->acquire(prompt);
    req.reuse = hit.reuse;
    req.reuse_tokens = hit.reuse_tokens(cache->block_tokens());
    req.checkpoint_interval = cache->checkpoint_interval();
    // The decode worker needs the whole KV: the reused prefix's full-attention blocks
    // travel too (the engine only emits what it computes).
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
  return r;
}

std::string prefill_job::close(const engine::result<engine::prefill_result>& r,
                               const kv_messages& messages, uint64_t ns) {
  if (!r || messages.stale()) {
    dp->cancel(tid);
    return r ? "dropped as stale (fencing)" : r.message();
  }
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
  return {};
}

/// The engine is done with an order (actor thread): its figures, its cache's changes to
/// the directory, its answer when it failed, and the next order.
void engine_done(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o,
                 const std::string& error, uint32_t computed, uint64_t ns,
                 const std::vector<engine::pool_event>& changes) {
  announce(self, ctx, name, changes);
  self->state.queue.engine_done(o->key, computed, std::chrono::nanoseconds(ns), error.empty());
  forget_if_gone(self, o);
  if (error.empty())
    self->state.stats->prefill_done(ns, computed, o->po.prompt_size());
  else
    answer(self, o,
           make_error(errc::bad_request, "prefill of " + o->po.request_id() + " failed: " + error));
  update_gauges(self);
  start_next(self, ctx, name);
}

void prefill_job::operator()(engine::engine& e) {
  // Chunks go out `group` at a time, in pool buffers (kv_messages.hpp); none once the
  // order is stale (fencing: checked per message, the actor may not know yet).
  kv_messages messages{*dp,
                       tid,
                       group,
                       max_chunk_bytes,
                       std::chrono::duration_cast<std::chrono::milliseconds>(pool_wait),
                       [ctx = ctx, o = o] { return is_stale(ctx, *o); }};
  const auto t0 = runner->now(); // the engine's time: virtual in simulation
  prefix_cache::lookup hit;
  auto r = compute(e, messages, hit);
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(runner->now() - t0).count());
  auto error = close(r, messages, ns);
  // Caching the new blocks comes after the transfer is complete on our side: it is not
  // on the request's path to its first token.
  std::vector<engine::pool_event> changes;
  if (cache) {
    if (r)
      cache->publish(e, seq, hit);
    cache->release(hit);
    changes.swap(*cache_events); // engine thread: the only one touching it
  }
  e.release(seq);
  inbox->post([self = self, ctx = ctx, name = name, o = o, error, ns,
               computed = r ? r->computed_tokens : 0u, changes = std::move(changes),
               counters = e.counters()] {
    self->state.stats->engine_counters(counters);
    engine_done(self, ctx, name, o, error, computed, ns, changes);
  });
}

} // namespace

void run(self_ptr self, node_context* ctx, const std::string& name, order_ptr o) {
  auto& s = self->state;
  auto* dp = ctx->data();
  const uint64_t tid = o->po.transfer_id();
  const auto queue_ns = static_cast<uint64_t>((self->clock().now() - o->enqueued).count());
  TransferMeta head;
  head.set_request_id(o->po.request_id());
  update_gauges(self);
  dp->open(tid, o->po.decode_node(), o->po.decode_sink(), head.SerializeAsString(),
           [inbox = s.inbox, self, o, queue_ns](transfer_outcome out) {
             inbox->post([self, o, out = std::move(out), queue_ns] {
               transfer_ended(self, o, out, queue_ns);
             });
           });
  s.runner->post(prefill_job{.self = self,
                             .ctx = ctx,
                             .name = name,
                             .o = o,
                             .dp = dp,
                             .tid = tid,
                             .seq = s.next_seq++,
                             .head = head,
                             .runner = s.runner.get(),
                             .inbox = s.inbox,
                             .cache = s.cache,
                             .cache_events = s.cache_events,
                             .group = s.layers_per_push,
                             .pool_wait = s.pool_wait,
                             .max_chunk_bytes = ctx->deployment().data_plane.max_chunk_bytes});
}

} // namespace prfaas::serving::prefill_detail

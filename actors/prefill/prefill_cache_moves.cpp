// The prefill worker's cache moves (prefill_state.hpp): pulling a prompt's cached
// blocks from the worker that holds them before computing, and serving such pulls.

#include "prefill/cache_move.hpp"
#include "prefill/prefill_state.hpp"
#include "prfaas/engine/block_hash.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"

namespace prfaas::serving::prefill_detail {

/// Stops waiting for the cache move of transfer `tid` and computes without it.
void end_pull(self_ptr self, node_context* ctx, const std::string& name, uint64_t tid,
              const std::string& why) {
  auto& s = self->state;
  auto it = s.pulling.find(tid);
  if (it == s.pulling.end())
    return;
  auto o = it->second;
  s.pulling.erase(it);
  if (!why.empty()) {
    ctx->node_metrics()
        .counter("prfaas_prefill_cache_moves_total", "Cache moves into this worker, by outcome",
                 {{"outcome", "skipped"}})
        .Increment();
    ctx->log()->info("cache_move_skipped request={} from={}/{} reason=\"{}\"", o->po.request_id(),
                     o->po.cache_from_node(), o->po.cache_from_actor(), why);
  }
  enqueue(self, ctx, name, o);
}

/// Asks the holder named in the order for the prompt's cached blocks; the order waits
/// (at most `pull_timeout`) for them, then runs with or without them.
void pull_cache(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o) {
  auto& s = self->state;
  std::vector<engine::token> prompt(o->po.prompt().begin(), o->po.prompt().end());
  auto ids = engine::block_hasher{s.cache->block_tokens()}.hash(prompt);
  ids.resize(std::min<size_t>(ids.size(), o->po.cache_blocks()));
  CachePull q;
  q.set_request_id(o->po.request_id());
  for (auto id : ids)
    q.add_block_ids(id);
  const uint64_t tid = ctx->new_id();
  q.set_transfer_id(tid);
  q.set_node(ctx->node());
  q.set_sink(name + ".cache");
  s.pulling[tid] = o;
  const auto wait =
      std::max<duration>(std::chrono::milliseconds(1),
                         std::min<duration>(s.pull_timeout, o->deadline - self->clock().now()));
  role_ref<prefill_role>(*ctx, name, {o->po.cache_from_node(), o->po.cache_from_actor()})
      .request(self, q, wait)
      .then(
          [self, ctx, name, tid](CachePullAccepted& a) {
            if (a.blocks() == 0)
              end_pull(self, ctx, name, tid, "the holder has none of the blocks now");
          },
          [self, ctx, name, tid](caf::error& e) { end_pull(self, ctx, name, tid, describe(e)); });
  self->delayed_send(self, wait, caf::timeout_atom_v, tid);
}

/// A cache move arrived: into the prefix cache (engine thread), then the order runs.
void cache_arrived(self_ptr self, node_context* ctx, const std::string& name,
                   received_transfer rt) {
  auto& s = self->state;
  if (!s.pulling.count(rt.id))
    return; // gave up on it already
  std::string error;
  auto x = unpack(rt, error);
  if (!x)
    return end_pull(self, ctx, name, rt.id, error);
  s.runner->post([inbox = s.inbox, self, ctx, name, tid = rt.id, cache = s.cache,
                  x = std::move(*x)](engine::engine&) {
    const uint32_t held = cache->import_prefix(x);
    inbox->post([self, ctx, name, tid, held, blocks = x.ids.size()] {
      ctx->node_metrics()
          .counter("prfaas_prefill_cache_moves_total", "Cache moves into this worker, by outcome",
                   {{"outcome", held == blocks ? "moved" : "skipped"}})
          .Increment();
      ctx->node_metrics()
          .counter("prfaas_prefill_cache_moved_blocks_total", "Blocks received by cache moves")
          .Increment(static_cast<double>(held));
      end_pull(self, ctx, name, tid, held == blocks ? "" : "the cache had no room for them");
    });
  });
}

/// A peer pulls cached blocks from this worker: export them on the engine thread and
/// send them over the data plane; the reply says how many are on their way.
prfaas::answer<CachePullAccepted> serve_pull(self_ptr self, node_context* ctx,
                                             const remote_message& msg, const CachePull& q) {
  auto& s = self->state;
  if (!s.cache)
    return make_error(errc::bad_request,
                      "CachePull " + q.request_id() + ": this worker has no prefix cache");
  reply_promise<CachePullAccepted> rp(self, msg);
  std::vector<engine::block_id> ids(q.block_ids().begin(), q.block_ids().end());
  s.runner->post([inbox = s.inbox, cache = s.cache, ids, q, rp, dp = ctx->data(),
                  log = ctx->log()](engine::engine&) mutable {
    auto x = cache->export_prefix(ids);
    if (!x.ids.empty()) {
      auto stream = pack(x);
      dp->open(q.transfer_id(), q.node(), q.sink(), std::move(stream.meta),
               [log, id = q.request_id(), to = q.node()](transfer_outcome out) {
                 if (!out.ok)
                   log->warn("cache_move_send_failed request={} to={} error=\"{}\"", id, to,
                             out.error);
               });
      for (auto& c : stream.chunks)
        dp->push(q.transfer_id(), std::move(c));
      dp->finish(q.transfer_id());
    }
    CachePullAccepted a;
    a.set_blocks(static_cast<uint32_t>(x.ids.size()));
    inbox->post([rp, a]() mutable { rp.deliver(a); });
  });
  return rp;
}

} // namespace prfaas::serving::prefill_detail

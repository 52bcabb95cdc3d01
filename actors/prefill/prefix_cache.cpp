#include "prefill/prefix_cache.hpp"

#include <algorithm>

namespace prfaas::serving {

using namespace prfaas::engine;

prefix_cache::prefix_cache(uint32_t block_tokens, uint64_t capacity_blocks, pool_listener listener,
                           uint32_t checkpoint_blocks)
    : hasher_(block_tokens), checkpoint_blocks_(std::max<uint32_t>(1, checkpoint_blocks)),
      listener_(std::move(listener)),
      pool_({.capacity_blocks = capacity_blocks, .block_bytes = 0, .checkpoint_blocks = 1},
            [this](const pool_event& ev) {
              if (ev.key.kind == entry_kind::kv) {
                if (ev.what == pool_event::type::stored)
                  parents_[ev.key.id] = ev.parent;
                else
                  parents_.erase(ev.key.id);
              }
              if (listener_)
                listener_(ev);
            }) {}

std::vector<std::pair<block_id, std::optional<block_id>>> prefix_cache::kv_blocks() const {
  return {parents_.begin(), parents_.end()};
}

prefix_cache::lookup prefix_cache::acquire(std::span<const token> prompt) {
  lookup l;
  l.ids = hasher_.hash(prompt);
  if (l.ids.empty())
    return l;
  uint32_t blocks = pool_.match(l.ids).reuse_blocks;
  const uint32_t b = hasher_.block_tokens();
  // At least one token must be computed; step back to a boundary with a checkpoint.
  while (blocks > 0 && (static_cast<uint64_t>(blocks) * b >= prompt.size() ||
                        !pool_.contains({l.ids[blocks - 1], entry_kind::checkpoint})))
    --blocks;
  if (blocks == 0 || !pool_.acquire_prefix(l.ids, blocks).ok())
    return l;
  auto chunks = pool_.collect_reuse(l.ids, blocks);
  if (!chunks) {
    pool_.release_prefix(l.ids, blocks);
    return l;
  }
  l.reuse_blocks = blocks;
  l.reuse = std::move(chunks.value());
  return l;
}

void prefix_cache::release(const lookup& l) {
  if (l.reuse_blocks > 0)
    pool_.release_prefix(l.ids, l.reuse_blocks);
}

void prefix_cache::publish(const engine::engine& e, seq_id seq, const lookup& l) {
  const uint32_t b = hasher_.block_tokens();
  for (uint32_t i = 0; i < l.ids.size(); ++i) {
    const bool have_kv = pool_.contains({l.ids[i], entry_kind::kv});
    if (!have_kv) {
      auto kv = e.export_kv(seq, i * b, (i + 1) * b);
      std::optional<block_id> parent;
      if (i > 0)
        parent = l.ids[i - 1];
      if (!kv || !pool_
                      .insert_kv(l.ids[i], parent,
                                 std::make_shared<const block_payload>(std::move(kv).value()))
                      .ok())
        return; // full, or the chain broke: later blocks could not be matched anyway
    }
    if ((i + 1) % checkpoint_blocks_ == 0 && !pool_.contains({l.ids[i], entry_kind::checkpoint})) {
      auto cp = e.export_checkpoint(seq, (i + 1) * b);
      if (!cp || !pool_
                      .insert_checkpoint(
                          l.ids[i], std::make_shared<const block_payload>(std::move(cp).value()))
                      .ok())
        return;
    }
  }
}

prefix_cache::exported prefix_cache::export_prefix(std::span<const block_id> ids) {
  exported x;
  uint32_t blocks = pool_.match(ids).reuse_blocks; // ends at a block with a checkpoint
  if (blocks == 0)
    return x;
  for (uint32_t i = 0; i < blocks; ++i) {
    auto kv = pool_.payload({ids[i], entry_kind::kv});
    if (!kv)
      return {}; // an entry without its bytes cannot be moved
    x.kv.push_back(std::move(kv));
  }
  x.checkpoint = pool_.payload({ids[blocks - 1], entry_kind::checkpoint});
  if (!x.checkpoint)
    return {};
  x.ids.assign(ids.begin(), ids.begin() + blocks);
  return x;
}

uint32_t prefix_cache::import_prefix(const exported& x) {
  if (x.ids.empty() || x.kv.size() != x.ids.size() || !x.checkpoint)
    return 0;
  uint32_t held = 0;
  for (uint32_t i = 0; i < x.ids.size(); ++i, ++held) {
    if (pool_.contains({x.ids[i], entry_kind::kv}))
      continue;
    std::optional<block_id> parent;
    if (i > 0)
      parent = x.ids[i - 1];
    if (!pool_.insert_kv(x.ids[i], parent, x.kv[i]).ok())
      return 0; // full: without the state after the last block none of it is reusable
  }
  if (!pool_.contains({x.ids.back(), entry_kind::checkpoint}) &&
      !pool_.insert_checkpoint(x.ids.back(), x.checkpoint).ok())
    return 0;
  return held;
}

} // namespace prfaas::serving

#pragma once

// A prefill worker's prefix cache: the engine's hybrid block pool (KV blocks plus the
// linear-attention checkpoint after each block) keyed by chained block hashes. Before
// a prefill it finds the longest reusable prefix and pins it; after, it caches every
// full block the prefill produced. Lives on the engine's thread (the pool is not
// thread-safe); changes go to `listener` (for the KV directory).

#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "prfaas/engine/block_hash.hpp"
#include "prfaas/engine/block_pool.hpp"
#include "prfaas/engine/engine.hpp"

namespace prfaas::serving {

class prefix_cache {
public:
  /// What a prefill may reuse: the prompt's block ids and the pinned prefix.
  struct lookup {
    std::vector<engine::block_id> ids;   ///< full blocks of the prompt
    uint32_t reuse_blocks = 0;           ///< pinned prefix, in blocks
    std::vector<engine::kv_chunk> reuse; ///< its chunks (for prefill_request::reuse)
    uint32_t reuse_tokens(uint32_t block_tokens) const { return reuse_blocks * block_tokens; }
  };

  /// A linear-attention checkpoint is kept after every `checkpoint_blocks`-th block
  /// (a real model's recurrent state is megabytes; its prefills also slice there).
  prefix_cache(uint32_t block_tokens, uint64_t capacity_blocks, engine::pool_listener listener = {},
               uint32_t checkpoint_blocks = 1);

  uint32_t block_tokens() const { return hasher_.block_tokens(); }
  /// The prefill's checkpoint_interval: tokens between checkpoints.
  uint32_t checkpoint_interval() const { return hasher_.block_tokens() * checkpoint_blocks_; }

  /// The longest cached prefix of `prompt` that leaves at least one token to compute,
  /// pinned until release(). An entry that fails to load is treated as a miss.
  lookup acquire(std::span<const engine::token> prompt);
  void release(const lookup& l);

  /// Caches the full blocks of a finished prefill of sequence `seq` (run with
  /// checkpoint_interval()): every block's KV, and the checkpoint after every
  /// checkpoint_blocks-th. Blocks that do not fit are skipped.
  void publish(const engine::engine& e, engine::seq_id seq, const lookup& l);

  /// A cached prefix as it leaves for another worker (a cache move): each block's KV
  /// and the linear-attention state after the last one.
  struct exported {
    std::vector<engine::block_id> ids;
    std::vector<engine::payload_ptr> kv; ///< one per block
    engine::payload_ptr checkpoint;      ///< after ids.back()
  };
  /// The longest run of `ids` held with a checkpoint at its end (empty: none). The
  /// payloads are shared, so a later eviction does not change what was exported.
  exported export_prefix(std::span<const engine::block_id> ids);
  /// Caches blocks another worker exported, as if this worker had computed them; how
  /// many blocks it now holds of them (fewer when the pool is full).
  uint32_t import_prefix(const exported& x);

  std::vector<engine::pool_key> snapshot() const { return pool_.snapshot(); }
  /// Every cached KV block with its parent (nullopt for a prompt's first block).
  std::vector<std::pair<engine::block_id, std::optional<engine::block_id>>> kv_blocks() const;
  engine::pool_stats stats() const { return pool_.stats(); }

private:
  engine::block_hasher hasher_;
  uint32_t checkpoint_blocks_;
  /// Parents of the cached KV blocks, kept from the pool's own events.
  std::unordered_map<engine::block_id, std::optional<engine::block_id>> parents_;
  engine::pool_listener listener_;
  engine::block_pool pool_;
};

} // namespace prfaas::serving

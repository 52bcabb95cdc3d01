#pragma once

#include "prfaas/engine/clock.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

namespace prfaas::engine {

/// The two groups of the hybrid prefix cache that share one block pool.
enum class entry_kind : uint8_t {
  kv = 0,         ///< full-attention KV of one block (block-level prefix reuse)
  checkpoint = 1, ///< linear-attention state right after that block (exact-length reuse)
};

/// A prefix-cache entry: the block's chained id plus which group it belongs to.
/// A checkpoint is keyed by the id of the last block it covers.
struct pool_key {
  block_id id = 0;
  entry_kind kind = entry_kind::kv;
  friend bool operator==(const pool_key&, const pool_key&) = default;
  friend auto operator<=>(const pool_key&, const pool_key&) = default;
};

struct pool_key_hash {
  size_t operator()(const pool_key& k) const noexcept {
    return static_cast<size_t>(k.id ^ (static_cast<uint64_t>(k.kind) * 0x9e3779b97f4a7c15ULL));
  }
};

/// What a cached entry holds: the engine chunks of that block (KV: one per full
/// layer; checkpoint: one per linear layer). May be null for accounting-only use
/// (simulation), the pool never looks inside.
using block_payload = std::vector<kv_chunk>;
using payload_ptr = std::shared_ptr<const block_payload>;

/// Pool sizing. Capacity counts blocks; a KV entry costs 1 block, a checkpoint
/// `checkpoint_blocks`, a transfer whatever it asks for.
struct pool_config {
  uint64_t capacity_blocks = 0;
  uint64_t block_bytes = 0;       ///< bytes per block, for byte-valued stats only
  uint32_t checkpoint_blocks = 1; ///< pool blocks one linear-state checkpoint occupies
};

/// A change of the pool's reusable contents, for the KV directory. Transfer
/// blocks are not announced (never reusable).
struct pool_event {
  enum class type : uint8_t { stored, evicted };
  type what = type::stored;
  pool_key key;
  std::optional<block_id> parent; ///< KV entries: previous block in the chain
};
using pool_listener = std::function<void(const pool_event&)>;

/// Result of a prefix lookup over a request's block ids.
struct prefix_match {
  uint32_t kv_blocks = 0;    ///< leading blocks whose KV is cached
  uint32_t reuse_blocks = 0; ///< largest j <= kv_blocks with a checkpoint at block j-1
                             ///< (0 = nothing reusable): reuse length = j · block_tokens
};

/// Counters and gauges.
struct pool_stats {
  uint64_t capacity_blocks = 0, used_blocks = 0;
  uint64_t kv_entries = 0, checkpoint_entries = 0, transfer_blocks = 0, transfers_open = 0;
  uint64_t pinned_entries = 0, referenced_entries = 0;
  uint64_t lookups = 0, hit_blocks = 0, miss_blocks = 0;
  uint64_t inserts = 0, duplicate_inserts = 0, insert_rejects = 0, evictions = 0;
  uint64_t transfers_allocated = 0, transfers_acked = 0, transfers_expired = 0;
  uint64_t transfer_rejects = 0;
  uint64_t used_bytes = 0; ///< used_blocks · block_bytes
};

/// Hybrid prefix cache pool: one bounded block pool shared by full-attention KV
/// blocks, linear-state checkpoints and transfer-cache blocks.
///
/// Invariants (checked by tests/unit/engine/test_block_pool_property.cpp):
///  * used_blocks <= capacity_blocks at all times; inserts and transfer allocations
///    evict as needed and fail (without side effects on referenced entries) if
///    they cannot fit.
///  * An entry that is acquired (refcount > 0) or pinned is never evicted.
///  * Eviction removes the least recently used *evictable* entry, where evictable
///    means unreferenced, unpinned and without cached dependants: a KV block is a
///    dependant of its parent, a checkpoint of the KV block with its id. Chains are
///    therefore evicted from the tail: a parent never leaves while a child that
///    needs it for a prefix match remains (the child would be unreachable).
///  * Inserting a KV block requires its parent to be cached; a checkpoint requires
///    its KV block. Both keep the prefix property of the cache.
///  * Transfer blocks belong to one transfer id; ack or lease expiry frees them.
///  * Every entry ever stored or evicted is reported exactly once per transition to
///    the listener, so replaying events reproduces snapshot().
/// Not thread-safe. Time enters only through the `now`/`expires_at` arguments.
class block_pool {
public:
  explicit block_pool(pool_config config, pool_listener listener = {});

  const pool_config& config() const { return config_; }

  /// Cache the KV of block `id` whose predecessor is `parent` (nullopt for the
  /// first block). Inserting an existing key only refreshes its recency.
  result<void> insert_kv(block_id id, std::optional<block_id> parent, payload_ptr payload = {});
  /// Cache the linear-state checkpoint taken right after block `id`.
  result<void> insert_checkpoint(block_id id, payload_ptr payload = {});

  /// Longest cached prefix of `ids`; marks the matched entries recently used.
  prefix_match match(std::span<const block_id> ids);
  bool contains(const pool_key& key) const { return entries_.count(key) != 0; }
  /// Payload of a cached entry (null if absent or accounting-only).
  payload_ptr payload(const pool_key& key) const;

  /// Reference counting: an acquired entry cannot be evicted until released.
  result<void> acquire(const pool_key& key);
  void release(const pool_key& key);
  /// Acquire KV blocks [0, blocks) of `ids` plus the checkpoint at block blocks-1
  /// (the reuse set of a prefix_match); all-or-nothing.
  result<void> acquire_prefix(std::span<const block_id> ids, uint32_t blocks);
  void release_prefix(std::span<const block_id> ids, uint32_t blocks);
  /// The chunks for prefill_request::reuse of a prefix of `blocks` blocks.
  result<std::vector<kv_chunk>> collect_reuse(std::span<const block_id> ids, uint32_t blocks) const;

  /// Pinning: a pinned entry is never evicted (e.g. a hot system prompt).
  result<void> pin(const pool_key& key);
  void unpin(const pool_key& key);

  /// Transfer cache: `blocks` blocks held for transfer `transfer_id` until ack or
  /// until `expires_at` passes (expire_transfers). Evicts prefix blocks if needed.
  result<void> allocate_transfer(uint64_t transfer_id, uint64_t blocks, nanos expires_at,
                                 payload_ptr payload = {});
  /// Frees a transfer's blocks; false if unknown (already acked or expired).
  bool ack_transfer(uint64_t transfer_id);
  /// Frees every transfer whose lease ended at or before `now`; returns how many.
  size_t expire_transfers(nanos now);
  bool has_transfer(uint64_t transfer_id) const { return transfers_.count(transfer_id) != 0; }

  /// Evict every evictable entry (repeatedly, so whole unreferenced chains go).
  size_t evict_unused();

  /// All cached entries (for re-announcing to a restarted directory).
  std::vector<pool_key> snapshot() const;
  pool_stats stats() const;
  uint64_t used_blocks() const { return used_; }
  uint64_t free_blocks() const { return config_.capacity_blocks - used_; }

private:
  struct entry {
    std::optional<block_id> parent; ///< KV: previous block; checkpoint: unset
    payload_ptr payload;
    uint64_t tick = 0; ///< last use, from counter_ (LRU order)
    uint32_t refs = 0;
    uint32_t children = 0; ///< cached dependants (child KV blocks + own checkpoint)
    bool pinned = false;
    bool in_lru = false; ///< member of lru_ (evictable)
    uint32_t cost = 1;   ///< blocks occupied
  };
  struct transfer {
    uint64_t blocks = 0;
    nanos expires_at{0};
    payload_ptr payload;
  };

  result<void> insert(const pool_key& key, std::optional<pool_key> depends_on, payload_ptr p,
                      uint32_t cost);
  void touch(const pool_key& key, entry& e);
  void refresh_lru(const pool_key& key, entry& e);
  /// Evict LRU entries until `blocks` are free; false if impossible (nothing evicted
  /// beyond what was evictable — evicting unreferenced blocks is always allowed).
  bool make_room(uint64_t blocks);
  void evict(pool_key key);
  void emit(pool_event::type what, const pool_key& key, std::optional<block_id> parent);
  std::optional<pool_key> dependency_of(const pool_key& key, const entry& e) const;

  pool_config config_;
  pool_listener listener_;
  std::unordered_map<pool_key, entry, pool_key_hash> entries_;
  std::set<std::pair<uint64_t, pool_key>> lru_; ///< evictable entries by last use
  std::unordered_map<uint64_t, transfer> transfers_;
  uint64_t used_ = 0;
  uint64_t counter_ = 0;
  pool_stats counters_;
};

} // namespace prfaas::engine

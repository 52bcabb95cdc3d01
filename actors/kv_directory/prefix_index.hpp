#pragma once

// The KV directory's index: which holder (a worker: node + actor, in a cluster) keeps
// which chained prefix block, in which tier. Plain C++; the kv_directory actor feeds
// it from the workers' pool events and asks it for prefix matches.
//
// Invariants:
//  * every entry whose parent is known links to an entry for that parent (a
//    *ghost* without holders is created for a parent not announced yet), so a parent
//    never leaves the index while a child does: matches walk chains from the root;
//  * an entry leaves only when it is a leaf (no children) and either has no holders
//    left or is evicted for capacity; removing it may leave its parent a holderless
//    leaf, which then goes too;
//  * size() <= capacity() after every public call: capacity eviction takes the least
//    recently used leaf (stored or matched), so chains shrink from their tails;
//  * per holder, an epoch that never decreases: a report at a higher epoch replaces
//    the holder's state, one at a lower epoch is ignored (stale).
// Not thread-safe.

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace prfaas::directory {

using block_id = uint64_t;

/// Where a holder keeps a block; lower is faster (values as in directory.proto).
enum class tier : uint8_t { device = 0, host = 1, disk = 2 };
inline constexpr int tier_count = 3;

/// A worker whose pool holds blocks.
struct holder_ref {
  std::string node;
  std::string actor;
  std::string cluster;
};

/// A run of chained ids; `parent` is the block before ids[0] (none: a first block).
struct chain {
  std::optional<block_id> parent;
  std::vector<block_id> ids;
};

struct node_match {
  holder_ref holder;
  uint32_t blocks = 0;           ///< query blocks [0, blocks) all held
  tier slowest = tier::device;   ///< slowest tier needed to read those blocks
};

struct cluster_match {
  std::string cluster;
  uint32_t blocks = 0;           ///< longest over the cluster's holders
  std::vector<size_t> best;      ///< indices into match_result::nodes with that many
};

struct match_result {
  std::vector<node_match> nodes;       ///< blocks > 0 only; longest first, then by name
  std::vector<cluster_match> clusters; ///< longest first, then by name
  uint32_t longest = 0;
};

/// What a report did.
enum class apply_outcome {
  applied,  ///< added to (or removed from) the holder's current epoch
  replaced, ///< a newer epoch: the holder's old state was dropped first
  stale,    ///< older than the holder's epoch: ignored
};

struct index_stats {
  uint64_t entries = 0;      ///< distinct block ids (ghosts included)
  uint64_t holders = 0;      ///< holders known (with or without blocks)
  uint64_t references = 0;   ///< (block, holder) pairs
  uint64_t evictions = 0;    ///< entries removed for capacity
  uint64_t queries = 0;
  uint64_t hit_blocks = 0;   ///< sum over queries of the longest match
  uint64_t stale_reports = 0;
};

class prefix_index {
public:
  /// `capacity` counts entries (distinct block ids); at least 1.
  explicit prefix_index(size_t capacity);

  /// The holder stored `chains` in tier `t` at `epoch`.
  apply_outcome store(const holder_ref& h, uint64_t epoch, tier t, std::span<const chain> chains);
  /// The holder evicted `ids` from tier `t` at `epoch`.
  apply_outcome evict(const holder_ref& h, uint64_t epoch, tier t, std::span<const block_id> ids);

  /// Forgets every holder on `node` (its blocks and its epochs): the node is down, or
  /// restarted with an empty pool. Returns the (block, holder) pairs dropped.
  size_t drop_node(const std::string& node);

  /// Longest prefix of `ids` per holder and per cluster, in one pass over the chain;
  /// marks the matched entries recently used.
  match_result match(std::span<const block_id> ids);

  /// Blocks `h` holds (any tier); 0 for an unknown holder.
  size_t blocks_of(const std::string& node, const std::string& actor) const;
  /// Holders known on `node` (node, actor, cluster).
  std::vector<holder_ref> holders_on(const std::string& node) const;
  bool contains(block_id id) const { return entries_.count(id) != 0; }

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  index_stats stats() const;

private:
  using holder_idx = uint32_t;

  struct holder {
    holder_ref ref;
    uint64_t epoch = 0;
    std::unordered_map<block_id, uint8_t> blocks; ///< block → tier bit mask
    bool live = false; ///< slot in use (false: on the free list)
  };
  struct entry {
    std::optional<block_id> parent;
    std::vector<std::pair<holder_idx, uint8_t>> holders; ///< (holder, tier mask)
    uint32_t children = 0;
    uint64_t tick = 0;
  };

  holder_idx holder_for(const holder_ref& h);
  /// Applies the epoch rule; returns stale or whether the state was replaced.
  apply_outcome admit(holder_idx hi, uint64_t epoch);
  void clear_holder(holder_idx hi);
  /// Adds `(hi, t)` to block `id` (created if absent) with `parent`.
  void add(holder_idx hi, tier t, block_id id, std::optional<block_id> parent);
  /// Creates an entry (a ghost until a holder is added) linked to its parent.
  entry& ensure(block_id id, std::optional<block_id> parent);
  /// Removes `(hi, mask bits)` from block `id`; drops the entry if it became useless.
  void remove_ref(holder_idx hi, block_id id, uint8_t mask);
  /// Removes `id` if it is a holderless leaf, then its parent likewise, and so on.
  void collect(block_id id);
  void erase_entry(std::unordered_map<block_id, entry>::iterator it);
  void touch(block_id id, entry& e);
  void enforce_capacity();

  size_t capacity_;
  std::unordered_map<block_id, entry> entries_;
  std::set<std::pair<uint64_t, block_id>> leaves_; ///< leaf entries by last use (LRU first)
  std::vector<holder> holders_;
  std::vector<holder_idx> free_holders_;
  std::unordered_map<std::string, holder_idx> holder_by_name_; ///< "node/actor"
  uint64_t clock_ = 0;
  uint64_t references_ = 0;
  uint64_t evictions_ = 0, queries_ = 0, hit_blocks_ = 0, stale_ = 0;
  // scratch for match(): per holder slot
  std::vector<uint32_t> seen_at_;
  std::vector<uint8_t> slowest_;
};

} // namespace prfaas::directory

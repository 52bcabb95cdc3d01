#pragma once

// The KV directory's index: which holder (a worker: node + actor, in a cluster) keeps
// which chained prefix block, in which tier. Plain C++; the kv_directory actor feeds
// it from the workers' pool events and asks it for prefix matches.
//
// Invariants (audit() checks them all):
//  * every entry whose parent is known links to an entry for that parent (a
//    *ghost* without holders is created for a parent not announced yet), so a parent
//    never leaves the index while a child does: matches walk chains from the root;
//  * a parent, once learned, is kept; a parent that would close a cycle is refused;
//  * an entry leaves only when it is a leaf (no children) and either has no holders
//    left or is evicted for capacity; removing it may leave its parent a holderless
//    leaf, which then goes too (no holderless leaf stays);
//  * size() <= capacity() after every public call: capacity eviction takes the least
//    recently used leaf (stored or matched), so chains shrink from their tails. An
//    interior entry the eviction scan passes is parked off the recency list (it is
//    older than every entry on it); when its last child goes it rejoins as the least
//    recent. Parked entries rejoining in another order than they were used is the one
//    departure from exact LRU;
//  * per holder, an epoch that never decreases: a report at a higher epoch replaces
//    the holder's state, one at a lower epoch is ignored (stale);
//  * stats().references is the number of (entry, holder) pairs, and each holder's
//    blocks_of() its share of them.
//
// Layout (for >= 10M blocks at <= 64 B each): entries are 40-byte nodes in fixed
// 10 MiB pages on huge pages (indices never move: parents and the recency list are
// 32-bit indices), found through a block_table of 8-byte slots (11-21 B per entry).
// A chain's entries, handed out one after another when it is stored, are mostly
// neighbours, and match() walks them so (see there): a table lookup only where the run
// breaks.
// Up to 8 holders sit in the node as 16-bit refs (13-bit holder slot, 3 tier bits);
// more spill to a side vector. Which blocks a holder has is not kept per holder:
// replacing or dropping a holder with blocks scans every node once (rare: a worker
// restart or a node down), everything else is O(chain).
// At most 8192 holders (workers) at once; another is a std::length_error.
// Not thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unordered_map>

#include "kv_directory/block_table.hpp"

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
  uint32_t blocks = 0;         ///< query blocks [0, blocks) all held
  tier slowest = tier::device; ///< slowest tier needed to read those blocks
};

struct cluster_match {
  std::string cluster;
  uint32_t blocks = 0;      ///< longest over the cluster's holders
  std::vector<size_t> best; ///< indices into match_result::nodes with that many
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
  uint64_t entries = 0;    ///< distinct block ids (ghosts included)
  uint64_t holders = 0;    ///< holders known (with or without blocks)
  uint64_t references = 0; ///< (block, holder) pairs
  uint64_t evictions = 0;  ///< entries removed for capacity
  uint64_t queries = 0;
  uint64_t hit_blocks = 0; ///< sum over queries of the longest match
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
  bool contains(block_id id) const { return find(id) != no_node; }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  index_stats stats() const;

  /// Checks every invariant above by walking the whole index (for tests): empty when
  /// consistent, else what is wrong and at which block.
  std::string audit() const;

private:
  struct audit_state; ///< what audit() counted and found (prefix_index_audit.cpp)
  void audit_entries(audit_state& a) const;
  void audit_links(audit_state& a) const;
  void audit_holders(audit_state& a) const;

  using holder_idx = uint32_t;
  using node_idx = uint32_t;
  /// A holder on an entry: holder slot << 3 | tier mask; never 0 (the mask is not).
  using ref = uint16_t;
  static constexpr unsigned tier_bits = 3;
  static constexpr ref tier_mask = (1u << tier_bits) - 1;
  static constexpr uint32_t holder_limit = 1u << (16 - tier_bits);
  static holder_idx holder_of(ref r) { return r >> tier_bits; }
  static constexpr node_idx no_node = UINT32_MAX;
  static constexpr unsigned inline_refs = 8;
  static constexpr unsigned page_bits = 18; ///< 10 MiB: five whole huge pages

  /// What match() reads comes first (32 bytes), so that part more often lies on one
  /// cache line. It hardly matters: nodes padded to 64 bytes matched no faster, since
  /// a random page costs more than a second line (see match()).
  struct node {
    block_id id = 0;
    uint32_t children : 29 = 0;
    uint32_t listed : 1 = 0;  ///< on the recency list (else parked, or free)
    uint32_t spilled : 1 = 0; ///< refs in spills_[holders.spill]
    uint32_t live : 1 = 0;
    union {
      ref refs[inline_refs]; ///< packed at the front, 0 past the last
      uint32_t spill;
    } holders{};
    node_idx next = no_node; ///< recency list (toward the most recent); chains free nodes
    node_idx prev = no_node;
    node_idx parent = no_node;
  };
  static_assert(sizeof(node) == 40, "the per-block budget counts on 40-byte nodes");

  struct holder {
    holder_ref ref;
    uint64_t epoch = 0;
    uint64_t blocks = 0; ///< entries with a ref of this holder
    bool live = false;   ///< slot in use (false: on the free list)
  };

  node& at(node_idx i) { return pages_[i >> page_bits][i & ((1u << page_bits) - 1)]; }
  const node& at(node_idx i) const { return pages_[i >> page_bits][i & ((1u << page_bits) - 1)]; }
  node_idx find(block_id id) const;
  std::span<ref> refs_of(node& n);
  std::span<const ref> refs_of(const node& n) const;
  /// The ref of `h` on the entry (0: none).
  ref ref_for(const node& n, holder_idx h) const;
  /// Adds tier bits `mask` for `hi`; true when `hi` was not on the entry before.
  bool add_ref(node& n, holder_idx hi, uint8_t mask);
  /// Clears tier bits `mask` of `hi`; true when that removed `hi` from the entry.
  bool remove_ref(node& n, holder_idx hi, uint8_t mask);
  void erase_ref_at(node& n, size_t k);

  holder_idx holder_for(const holder_ref& h);
  /// Applies the epoch rule; returns stale or whether the state was replaced.
  apply_outcome admit(holder_idx hi, uint64_t epoch);
  /// Removes every ref of the holders flagged in `doomed` (one scan of all nodes).
  void clear_holders(const std::vector<bool>& doomed);
  /// Adds `(hi, t)` to block `id` (created if absent) with `parent`.
  void add(holder_idx hi, tier t, block_id id, std::optional<block_id> parent);
  /// The entry for `id`, created (a ghost until a holder is added) and linked to its parent.
  node_idx ensure(block_id id, std::optional<block_id> parent);
  node_idx new_node(block_id id);
  /// Removes `(hi, mask bits)` from block `id`; drops the entry if it became useless.
  void drop_ref(holder_idx hi, block_id id, uint8_t mask);
  /// Removes `i` if it is a holderless leaf, then its parent likewise, and so on.
  void collect(node_idx i);
  void erase_node(node_idx i);
  void link_front(node_idx i);
  void link_back(node_idx i);
  void unlink(node_idx i);
  void touch(node_idx i);
  /// touch() of each of `seq` (at `where`) in order, moving each run of them that
  /// already follows itself on the recency list in one splice (a stored chain is such
  /// a run).
  void touch_in_order(std::span<const node_idx> seq, node* const* where);
  void enforce_capacity();
  /// Hints for store() and evict() (match() stages its own): for block ids[k] coming up,
  /// the table slots of ids[k + 2·lookahead] and the
  /// node ids[k + lookahead] probably is are prefetched (lookups then hit the cache).
  static constexpr size_t lookahead = 8;
  void prefetch_ahead(std::span<const block_id> ids, size_t k) const;
  /// A holder still matching in match(), with the slowest tier it needed so far.
  struct alive_holder {
    holder_idx h;
    uint32_t slowest;
  };
  /// One step of match() while more than inline_refs holders are alive: entry `n` is
  /// block `i` of the query; narrows alive_ (block 0: fills it).
  void visit(const node& n, uint32_t i);
  std::string key_of(const std::string& node, const std::string& actor) const;

  size_t capacity_;
  size_t size_ = 0;
  std::vector<big_array<node>> pages_;       ///< nodes [0, allocated_) initialised
  node_idx allocated_ = 0;                   ///< nodes ever handed out (high-water mark)
  node_idx free_ = no_node;                  ///< free nodes, chained through `next`
  node_idx head_ = no_node, tail_ = no_node; ///< recency list: least recent first
  block_table table_;
  std::vector<std::vector<ref>> spills_;
  std::vector<uint32_t> free_spills_;
  std::vector<holder> holders_;
  std::vector<holder_idx> free_holders_;
  std::unordered_map<std::string, holder_idx> holder_by_name_; ///< key_of(node, actor)
  uint64_t references_ = 0;
  uint64_t evictions_ = 0, queries_ = 0, hit_blocks_ = 0, stale_ = 0;
  // scratch for match(); `seen_at_` (per holder slot) holds steps, which never repeat
  uint64_t step_ = 0;
  std::vector<uint64_t> seen_at_;
  std::vector<uint32_t> tier_here_;
  std::vector<alive_holder> alive_, next_;
  std::vector<node_idx> matched_; ///< entries matched so far, grown, never shrunk
  std::vector<node*> matched_at_; ///< where they are
  struct ended_holder {
    holder_idx h;
    uint32_t blocks, slowest;
  };
  std::vector<ended_holder> ended_;
};

} // namespace prfaas::directory

#include "kv_directory/prefix_index.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace prfaas::directory {

namespace {

uint8_t bit(tier t) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(t));
}

/// The fastest tier in a non-empty mask.
uint8_t fastest(unsigned mask) {
  return static_cast<uint8_t>(__builtin_ctz(mask));
}

} // namespace

static_assert(tier_count <= 3, "a ref has three tier bits");

prefix_index::prefix_index(size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0)
    throw std::invalid_argument("prefix_index: capacity must be at least 1");
  if (capacity_ >= no_node)
    throw std::invalid_argument("prefix_index: capacity must be below 2^32 - 1");
}

// -- entries ------------------------------------------------------------------------

prefix_index::node_idx prefix_index::find(block_id id) const {
  return table_.find(id, block_table::tag_of(id), [this](node_idx i) { return at(i).id; });
}

std::span<prefix_index::ref> prefix_index::refs_of(node& n) {
  if (n.spilled)
    return spills_[n.holders.spill];
  size_t k = 0;
  while (k < inline_refs && n.holders.refs[k])
    ++k;
  return {n.holders.refs, k};
}

std::span<const prefix_index::ref> prefix_index::refs_of(const node& n) const {
  return const_cast<prefix_index*>(this)->refs_of(const_cast<node&>(n));
}

bool prefix_index::add_ref(node& n, holder_idx hi, uint8_t mask) {
  auto refs = refs_of(n);
  for (auto& r : refs)
    if (holder_of(r) == hi) {
      r |= mask;
      return false;
    }
  const auto r = static_cast<ref>(hi << tier_bits | mask);
  if (n.spilled) {
    spills_[n.holders.spill].push_back(r);
  } else if (refs.size() < inline_refs) {
    n.holders.refs[refs.size()] = r;
  } else { // a ninth holder: move them all aside
    uint32_t s;
    if (!free_spills_.empty()) {
      s = free_spills_.back();
      free_spills_.pop_back();
    } else {
      s = static_cast<uint32_t>(spills_.size());
      spills_.emplace_back();
    }
    spills_[s].assign(refs.begin(), refs.end());
    spills_[s].push_back(r);
    n.holders.spill = s;
    n.spilled = 1;
  }
  return true;
}

void prefix_index::erase_ref_at(node& n, size_t k) {
  if (n.spilled) {
    auto& v = spills_[n.holders.spill];
    v[k] = v.back();
    v.pop_back();
    if (v.size() <= inline_refs / 2) { // back inside, with room before spilling again
      auto s = n.holders.spill;
      n.holders = {};
      std::copy(v.begin(), v.end(), n.holders.refs);
      n.spilled = 0;
      spills_[s] = {};
      free_spills_.push_back(s);
    }
    return;
  }
  auto refs = refs_of(n);
  refs[k] = refs.back();
  refs.back() = 0;
}

bool prefix_index::remove_ref(node& n, holder_idx hi, uint8_t mask) {
  auto refs = refs_of(n);
  for (size_t k = 0; k < refs.size(); ++k) {
    if (holder_of(refs[k]) != hi)
      continue;
    const auto left = static_cast<ref>(refs[k] & ~mask);
    if (left & tier_mask) {
      refs[k] = left;
      return false;
    }
    erase_ref_at(n, k); // not zeroed first: holder 0 with no tier would read as the end
    return true;
  }
  return false;
}

prefix_index::node_idx prefix_index::new_node(block_id id) {
  node_idx i;
  if (free_ != no_node) {
    i = free_;
    free_ = at(i).next;
  } else {
    i = allocated_++;
    if ((i >> page_bits) == pages_.size())
      pages_.push_back(allocate_big<node>(size_t{1} << page_bits));
  }
  auto& n = *new (&at(i)) node{};
  n.id = id;
  n.live = 1;
  ++size_;
  link_back(i);
  return i;
}

prefix_index::node_idx prefix_index::ensure(block_id id, std::optional<block_id> parent) {
  const auto i = table_
                     .find_or_insert(
                         id, block_table::tag_of(id), [this](node_idx k) { return at(k).id; },
                         [&] { return new_node(id); })
                     .first;
  auto& e = at(i); // nodes never move: stays valid through the recursion below
  if (e.parent != no_node || !parent || *parent == id)
    return i;
  // Learning the parent of an entry that has children (a ghost announced late): refuse
  // a parent that descends from `id`, which would close a cycle (a 64-bit collision or
  // a confused reporter) and make both entries unremovable.
  if (e.children > 0) {
    size_t steps = 0;
    for (auto up = find(*parent); up != no_node && steps <= size_; up = at(up).parent, ++steps)
      if (up == i)
        return i;
  }
  const auto p = ensure(*parent, std::nullopt);
  e.parent = p;
  ++at(p).children;
  return i;
}

void prefix_index::collect(node_idx i) {
  while (i != no_node) {
    auto& n = at(i);
    if (!n.live || n.children > 0 || !refs_of(n).empty())
      return;
    auto parent = n.parent;
    erase_node(i);
    i = parent;
  }
}

void prefix_index::erase_node(node_idx i) {
  auto& n = at(i);
  if (n.listed)
    unlink(i);
  for (auto r : refs_of(n)) {
    --holders_[holder_of(r)].blocks;
    --references_;
  }
  if (n.spilled) {
    spills_[n.holders.spill] = {};
    free_spills_.push_back(n.holders.spill);
  }
  table_.erase(block_table::tag_of(n.id), i);
  if (n.parent != no_node) {
    auto& p = at(n.parent);
    if (--p.children == 0 && !p.listed)
      link_front(n.parent); // parked, so older than everything listed
  }
  n = node{};
  n.next = free_;
  free_ = i;
  --size_;
}

// -- recency list -------------------------------------------------------------------

void prefix_index::link_back(node_idx i) {
  auto& n = at(i);
  n.prev = tail_;
  n.next = no_node;
  (tail_ == no_node ? head_ : at(tail_).next) = i;
  tail_ = i;
  n.listed = 1;
}

void prefix_index::link_front(node_idx i) {
  auto& n = at(i);
  n.prev = no_node;
  n.next = head_;
  (head_ == no_node ? tail_ : at(head_).prev) = i;
  head_ = i;
  n.listed = 1;
}

void prefix_index::unlink(node_idx i) {
  auto& n = at(i);
  (n.prev == no_node ? head_ : at(n.prev).next) = n.next;
  (n.next == no_node ? tail_ : at(n.next).prev) = n.prev;
  n.prev = n.next = no_node;
  n.listed = 0;
}

void prefix_index::touch(node_idx i) {
  if (tail_ == i)
    return;
  if (at(i).listed)
    unlink(i);
  link_back(i);
}

void prefix_index::touch_in_order(std::span<const node_idx> seq, node* const* where) {
  for (size_t a = 0; a < seq.size();) {
    const auto first = seq[a];
    if (!where[a]->listed) { // parked: rejoins alone
      link_back(first);
      ++a;
      continue;
    }
    // seq[a..b] follow each other on the list as it is now (a run computed before the
    // splices could be stale: a query may name a block twice)
    size_t b = a;
    while (b + 1 < seq.size() && where[b]->next == seq[b + 1])
      ++b;
    const auto last = seq[b];
    auto& f = *where[a];
    auto& l = *where[b];
    a = b + 1;
    if (last == tail_)
      continue;
    (f.prev == no_node ? head_ : at(f.prev).next) = l.next;
    at(l.next).prev = f.prev;
    f.prev = tail_;
    at(tail_).next = first;
    l.next = no_node;
    tail_ = last;
  }
}

void prefix_index::enforce_capacity() {
  while (size_ > capacity_ && head_ != no_node) {
    const auto victim = head_;
    auto& n = at(victim);
    if (n.children > 0) { // not a leaf: park it until its last child goes
      unlink(victim);
      continue;
    }
    const auto parent = n.parent;
    erase_node(victim);
    ++evictions_;
    collect(parent); // a holderless ghost left as a leaf is useless
  }
}

// -- holders ------------------------------------------------------------------------

std::string prefix_index::key_of(const std::string& node, const std::string& actor) const {
  std::string key;
  key.reserve(node.size() + actor.size() + 1);
  key.append(node).push_back('\0');
  key.append(actor);
  return key;
}

prefix_index::holder_idx prefix_index::holder_for(const holder_ref& h) {
  auto key = key_of(h.node, h.actor);
  if (auto i = holder_by_name_.find(key); i != holder_by_name_.end()) {
    auto& ref = holders_[i->second].ref;
    if (!h.cluster.empty() && ref.cluster != h.cluster)
      ref.cluster = h.cluster;
    return i->second;
  }
  holder_idx hi;
  if (!free_holders_.empty()) {
    hi = free_holders_.back();
    free_holders_.pop_back();
  } else {
    if (holders_.size() >= holder_limit)
      throw std::length_error("prefix_index: more than " + std::to_string(holder_limit) +
                              " holders; refusing " + h.node + "/" + h.actor);
    hi = static_cast<holder_idx>(holders_.size());
    holders_.emplace_back();
  }
  auto& slot = holders_[hi];
  slot = holder{};
  slot.ref = h;
  slot.live = true;
  holder_by_name_.emplace(std::move(key), hi);
  return hi;
}

apply_outcome prefix_index::admit(holder_idx hi, uint64_t epoch) {
  auto& h = holders_[hi];
  if (epoch < h.epoch) {
    ++stale_;
    return apply_outcome::stale;
  }
  if (epoch == h.epoch)
    return apply_outcome::applied;
  bool had = h.blocks > 0;
  if (had) {
    std::vector<bool> doomed(holders_.size());
    doomed[hi] = true;
    clear_holders(doomed);
  }
  h.epoch = epoch;
  return had ? apply_outcome::replaced : apply_outcome::applied;
}

void prefix_index::clear_holders(const std::vector<bool>& doomed) {
  for (node_idx i = 0; i < allocated_; ++i) {
    auto& n = at(i);
    if (!n.live)
      continue; // free, or collected earlier in this scan
    auto refs = refs_of(n);
    bool removed = false;
    for (size_t k = refs.size(); k-- > 0;) { // backwards: erase_ref_at moves the last in
      auto h = holder_of(refs_of(n)[k]);
      if (!doomed[h])
        continue;
      erase_ref_at(n, k);
      --holders_[h].blocks;
      --references_;
      removed = true;
    }
    if (removed)
      collect(i);
  }
}

void prefix_index::add(holder_idx hi, tier t, block_id id, std::optional<block_id> parent) {
  const auto i = ensure(id, parent);
  if (add_ref(at(i), hi, bit(t))) {
    ++references_;
    ++holders_[hi].blocks;
  }
  touch(i);
}

void prefix_index::drop_ref(holder_idx hi, block_id id, uint8_t mask) {
  const auto i = find(id);
  if (i == no_node)
    return;
  if (remove_ref(at(i), hi, mask)) {
    --references_;
    --holders_[hi].blocks;
  }
  collect(i);
}

void prefix_index::prefetch_ahead(std::span<const block_id> ids, size_t k) const {
  if (k + 2 * lookahead < ids.size())
    table_.prefetch(block_table::tag_of(ids[k + 2 * lookahead]));
  if (k + lookahead < ids.size())
    if (auto c = table_.candidate(block_table::tag_of(ids[k + lookahead])); c != no_node)
      __builtin_prefetch(&at(c));
}

// -- public -------------------------------------------------------------------------

apply_outcome prefix_index::store(const holder_ref& h, uint64_t epoch, tier t,
                                  std::span<const chain> chains) {
  auto hi = holder_for(h);
  auto out = admit(hi, epoch);
  if (out == apply_outcome::stale)
    return out;
  for (auto& c : chains) {
    auto prev = c.parent;
    for (size_t k = 0; k < c.ids.size(); ++k) {
      prefetch_ahead(c.ids, k);
      add(hi, t, c.ids[k], prev);
      prev = c.ids[k];
    }
  }
  enforce_capacity();
  return out;
}

apply_outcome prefix_index::evict(const holder_ref& h, uint64_t epoch, tier t,
                                  std::span<const block_id> ids) {
  auto hi = holder_for(h);
  auto out = admit(hi, epoch);
  if (out == apply_outcome::stale)
    return out;
  for (size_t k = 0; k < ids.size(); ++k) {
    prefetch_ahead(ids, k);
    drop_ref(hi, ids[k], bit(t));
  }
  return out;
}

size_t prefix_index::drop_node(const std::string& node) {
  size_t dropped = 0;
  std::vector<bool> doomed(holders_.size());
  std::vector<holder_idx> gone;
  for (holder_idx hi = 0; hi < holders_.size(); ++hi)
    if (holders_[hi].live && holders_[hi].ref.node == node) {
      doomed[hi] = true;
      dropped += holders_[hi].blocks;
      gone.push_back(hi);
    }
  if (dropped > 0)
    clear_holders(doomed);
  for (auto hi : gone) {
    auto& h = holders_[hi];
    holder_by_name_.erase(key_of(h.ref.node, h.ref.actor));
    h = holder{};
    free_holders_.push_back(hi);
  }
  return dropped;
}

[[gnu::always_inline]] inline prefix_index::ref prefix_index::ref_for(const node& n,
                                                                      holder_idx h) const {
  if (n.spilled) {
    for (auto r : spills_[n.holders.spill])
      if (holder_of(r) == h)
        return r;
    return 0;
  }
  for (auto r : n.holders.refs) {
    if (!r)
      return 0;
    if (holder_of(r) == h)
      return r;
  }
  return 0;
}

[[gnu::always_inline]] inline void prefix_index::visit(const node& n, uint32_t i) {
  if (i == 0) {
    for (auto r : refs_of(n))
      alive_.push_back({holder_of(r), fastest(r & tier_mask)});
    return;
  }
  // Many alive (match() narrows a few itself): mark the entry's holders, keep the marked.
  const auto stamp = ++step_;
  for (auto r : refs_of(n)) {
    seen_at_[holder_of(r)] = stamp;
    tier_here_[holder_of(r)] = fastest(r & tier_mask);
  }
  next_.clear();
  for (auto a : alive_) {
    if (seen_at_[a.h] == stamp) {
      a.slowest = std::max(a.slowest, tier_here_[a.h]);
      next_.push_back(a);
    } else {
      ended_.push_back({a.h, i, a.slowest});
    }
  }
  alive_.swap(next_);
}

match_result prefix_index::match(std::span<const block_id> ids) {
  ++queries_;
  match_result out;
  if (ids.empty())
    return out;
  // One pass down the chain: `alive_` holds every holder that held all blocks so far;
  // a holder missing block i leaves with a match of i blocks.
  if (seen_at_.size() < holders_.size()) {
    seen_at_.resize(holders_.size());
    tier_here_.resize(holders_.size());
  }
  if (matched_.size() < ids.size()) {
    matched_.resize(ids.size());
    matched_at_.resize(ids.size());
  }
  alive_.clear();
  ended_.clear();
  // Staged lookups (a chain's walk is a series of dependent steps, its lookups are
  // not): the table slots of block i + slot_ahead are prefetched, block i + node_ahead
  // is probed and its node prefetched, block i is confirmed against its node. The
  // matched entries are marked used after the walk, in order, a run at a time.
  // Distances in blocks: a slot's line takes as long to come as ~8 steps of the walk
  // (prfaas-bench directory: 24/8 did at least as well as 16/8, 32/8, 32/16, 48/16).
  constexpr size_t slot_ahead = 24, node_ahead = 8, ring = 32;
  static_assert(node_ahead < slot_ahead && slot_ahead <= ring);
  const auto table = table_.read();
  auto* const pages = pages_.data();
  auto node_at = [pages](node_idx k) __attribute__((always_inline))->node& {
    return pages[k >> page_bits][k & ((1u << page_bits) - 1)];
  };
  const size_t n = ids.size();
  uint32_t tag[ring];       // of block k at k % ring, from its slot prefetch on
  node_idx candidate[ring]; // likewise, from its probe on
  node* candidate_at[ring]; // and where it is (null: none)
  auto stage = [&](size_t k) __attribute__((always_inline)) { // block k: prefetch its slots
    tag[k % ring] = block_table::tag_of(ids[k]);
    table.prefetch(tag[k % ring]);
  };
  auto probe = [&](size_t k)
      __attribute__((always_inline)) { // block k: read its slot, prefetch its node
    const auto c = table.candidate(tag[k % ring]);
    node* at_c = nullptr;
    if (c != no_node)
      __builtin_prefetch(at_c = &node_at(c));
    candidate[k % ring] = c;
    candidate_at[k % ring] = at_c;
  };
  // Two ways to find block k's entry. Entries of a stored chain are mostly handed out
  // one after another (the next fresh index, or the free list, which eviction refills
  // a chain tail at a time), so the entry after block k-1's is often block k's.
  // *Following* checks that one (its id tells) and needs no table lookup, and runs
  // through memory in order with the entries ahead prefetched; a table lookup lands on
  // a random page of a big table, and on a VM that is mostly a page walk. Where the
  // run breaks, the block is looked up (not staged: one lookup) and following goes
  // on from its entry; a second break within `settle` blocks means entries do not lie
  // in order here, and the walk *stages* table lookups as above until `settle` blocks
  // in a row lay in order again.
  // (Checking the entry `follow_ahead / 2` on to stage lookups before a break came
  // out slower: a staged stretch costs more page walks than the one lookup it saves.)
  constexpr size_t follow_ahead = 32, settle = 8;
  const node_idx allocated = allocated_;
  bool following = true;
  node_idx before = no_node; // block k-1's entry
  size_t streak = 0;         // following: blocks since the last break; staging: blocks in order
  auto prime = [&](size_t from) { // staging from block `from` on
    for (size_t k = from; k < std::min(from + slot_ahead, n); ++k)
      stage(k);
    for (size_t k = from; k < std::min(from + node_ahead, n); ++k)
      probe(k);
  };
  auto follow_from = [&](node_idx ni) { // following from entry `ni` on
    for (node_idx j = ni + 1; j <= ni + follow_ahead && j < allocated; ++j)
      __builtin_prefetch(&node_at(j));
  };
  // Block k's entry `ni` and where it is (null: none); blocks are stepped in order.
  auto step = [&](size_t k, node_idx & ni) __attribute__((always_inline))->node* {
    node* at_k = nullptr;
    if (following) {
      ni = before + 1;
      if (before != no_node && ni < allocated &&
          (at_k = &node_at(ni), at_k->live && at_k->id == ids[k])) {
        ++streak;
        if (ni + follow_ahead < allocated)
          __builtin_prefetch(&node_at(ni + follow_ahead));
      } else { // block 0, or the run broke
        ni = find(ids[k]);
        at_k = ni == no_node ? nullptr : &node_at(ni);
        if (k > 0 && streak < settle) {
          following = false;
          prime(k + 1);
        } else if (at_k) {
          follow_from(ni);
        }
        streak = 0;
      }
    } else {
      ni = candidate[k % ring];
      at_k = candidate_at[k % ring];
      if (at_k && at_k->id != ids[k]) { // another id with the same tag came first
        ni = find(ids[k]);
        at_k = ni == no_node ? nullptr : &node_at(ni);
      }
      if (at_k) {
        if (k + slot_ahead < n)
          stage(k + slot_ahead);
        if (k + node_ahead < n)
          probe(k + node_ahead);
        streak = before != no_node && ni == before + 1 ? streak + 1 : 0;
        if (streak == settle) {
          following = true;
          streak = 0;
          follow_from(ni);
        }
      }
    }
    before = ni;
    return at_k;
  };
  // Block k matched: its entry is marked used after the walk.
  auto* const matched = matched_.data();
  auto* const matched_at = matched_at_.data();
  auto keep = [&](uint32_t k, node_idx ni, node * at_k) __attribute__((always_inline)) {
    matched[k] = ni;
    matched_at[k] = at_k;
  };
  uint32_t i = 0;
  bool walking = true;
  // More holders alive than an entry keeps inline (block 0 spilled): the general
  // narrowing, with a mark per holder slot.
  for (; i < n && (i == 0 || alive_.size() > inline_refs); ++i) {
    node_idx ni;
    node* at_i = step(i, ni);
    if (!at_i || (visit(*at_i, i), alive_.empty())) {
      walking = false;
      break;
    }
    keep(i, ni, at_i);
  }
  // From here a few holders are alive (mostly one), kept in locals. A chain's entries
  // usually carry the very same refs (stores walk a chain in order, holder after
  // holder), and an entry whose refs equal the last narrowing entry's changes nothing:
  // most blocks cost one 16-byte compare. `none_yet` is no entry's refs (they are
  // packed at the front).
  // (Not reached with more alive: the loop above ran to the end of the query.)
  const bool narrow_here = walking && i < n;
  alive_holder alive[inline_refs];
  size_t live = 0;
  if (narrow_here)
    for (auto a : alive_)
      alive[live++] = a;
  constexpr uint64_t none_yet[2] = {0, ~uint64_t{0}};
  uint64_t last_refs[2] = {none_yet[0], none_yet[1]};
  static_assert(sizeof(node::holders.refs) == sizeof(last_refs));
  for (; narrow_here && i < n; ++i) {
    node_idx ni;
    node* at_i = step(i, ni);
    if (!at_i)
      break;
    const node& e = *at_i;
    if (e.spilled) {
      last_refs[0] = none_yet[0];
      last_refs[1] = none_yet[1];
    } else {
      uint64_t refs[2];
      std::memcpy(refs, e.holders.refs, sizeof refs);
      if (refs[0] == last_refs[0] && refs[1] == last_refs[1]) {
        keep(i, ni, at_i);
        continue;
      }
      last_refs[0] = refs[0];
      last_refs[1] = refs[1];
    }
    size_t kept = 0;
    for (size_t k = 0; k < live; ++k) {
      auto a = alive[k];
      const auto r = ref_for(e, a.h);
      if (!r) {
        ended_.push_back({a.h, i, a.slowest});
        continue;
      }
      a.slowest = std::max<uint32_t>(a.slowest, fastest(r & tier_mask));
      alive[kept++] = a;
    }
    live = kept;
    if (live == 0)
      break;
    keep(i, ni, at_i);
  }
  if (narrow_here)
    alive_.assign(alive, alive + live);
  touch_in_order({matched, i}, matched_at);
  for (auto a : alive_)
    ended_.push_back({a.h, i, a.slowest});

  // Holders longest first, then by cluster, node and actor (sorted as indices: a
  // holder_ref is three strings to move).
  std::erase_if(ended_, [](const ended_holder& e) { return e.blocks == 0; });
  std::sort(ended_.begin(), ended_.end(), [this](const ended_holder& a, const ended_holder& b) {
    if (a.blocks != b.blocks)
      return a.blocks > b.blocks;
    const auto& x = holders_[a.h].ref;
    const auto& y = holders_[b.h].ref;
    return std::tie(x.cluster, x.node, x.actor) < std::tie(y.cluster, y.node, y.actor);
  });
  out.nodes.reserve(ended_.size());
  for (auto& e : ended_)
    out.nodes.push_back({holders_[e.h].ref, e.blocks, static_cast<tier>(e.slowest)});
  // A cluster first appears at its longest holder, and in that order clusters are
  // longest first, then by name, as they are to be listed.
  for (size_t k = 0; k < out.nodes.size(); ++k) {
    auto& n = out.nodes[k];
    auto c = std::find_if(out.clusters.begin(), out.clusters.end(),
                          [&](auto& m) { return m.cluster == n.holder.cluster; });
    if (c == out.clusters.end()) {
      out.clusters.push_back({n.holder.cluster, n.blocks, {}});
      c = out.clusters.end() - 1;
    }
    if (n.blocks == c->blocks)
      c->best.push_back(k);
  }
  out.longest = out.nodes.empty() ? 0 : out.nodes.front().blocks;
  hit_blocks_ += out.longest;
  return out;
}

size_t prefix_index::blocks_of(const std::string& node, const std::string& actor) const {
  auto i = holder_by_name_.find(key_of(node, actor));
  return i == holder_by_name_.end() ? 0 : holders_[i->second].blocks;
}

std::vector<holder_ref> prefix_index::holders_on(const std::string& node) const {
  std::vector<holder_ref> out;
  for (auto& h : holders_)
    if (h.live && h.ref.node == node)
      out.push_back(h.ref);
  return out;
}

index_stats prefix_index::stats() const {
  index_stats s;
  s.entries = size_;
  s.holders = holder_by_name_.size();
  s.references = references_;
  s.evictions = evictions_;
  s.queries = queries_;
  s.hit_blocks = hit_blocks_;
  s.stale_reports = stale_;
  return s;
}

} // namespace prfaas::directory

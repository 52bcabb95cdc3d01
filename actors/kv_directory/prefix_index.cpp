#include "kv_directory/prefix_index.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace prfaas::directory {

namespace {

uint8_t bit(tier t) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(t));
}

/// The fastest tier in a non-empty mask.
uint8_t fastest(uint8_t mask) {
  uint8_t t = 0;
  while (!(mask & (1u << t)))
    ++t;
  return t;
}

std::string key_of(const std::string& node, const std::string& actor) {
  return node + "/" + actor;
}

} // namespace

prefix_index::prefix_index(size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0)
    throw std::invalid_argument("prefix_index: capacity must be at least 1");
}

prefix_index::holder_idx prefix_index::holder_for(const holder_ref& h) {
  auto key = key_of(h.node, h.actor);
  if (auto i = holder_by_name_.find(key); i != holder_by_name_.end()) {
    auto& ref = holders_[i->second].ref;
    if (!h.cluster.empty())
      ref.cluster = h.cluster;
    return i->second;
  }
  holder_idx hi;
  if (!free_holders_.empty()) {
    hi = free_holders_.back();
    free_holders_.pop_back();
  } else {
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
  bool had = !h.blocks.empty();
  clear_holder(hi);
  h.epoch = epoch;
  return had ? apply_outcome::replaced : apply_outcome::applied;
}

void prefix_index::clear_holder(holder_idx hi) {
  auto blocks = std::move(holders_[hi].blocks);
  holders_[hi].blocks.clear();
  for (auto& [id, mask] : blocks) {
    auto it = entries_.find(id);
    if (it == entries_.end())
      continue;
    auto& hs = it->second.holders;
    auto p = std::find_if(hs.begin(), hs.end(), [hi](auto& x) { return x.first == hi; });
    if (p != hs.end()) {
      hs.erase(p);
      --references_;
    }
    collect(id);
  }
}

prefix_index::entry& prefix_index::ensure(block_id id, std::optional<block_id> parent) {
  auto [it, inserted] = entries_.try_emplace(id);
  entry& e = it->second; // stays valid: unordered_map never moves its elements
  if (inserted) {
    e.tick = ++clock_;
    leaves_.emplace(e.tick, id);
  }
  if (e.parent || !parent || *parent == id)
    return e;
  // Learning the parent of an entry that has children (a ghost announced late): refuse
  // a parent that descends from `id`, which would close a cycle (a 64-bit collision or
  // a confused reporter) and make both entries unremovable.
  if (e.children > 0) {
    std::optional<block_id> up = parent;
    for (size_t steps = 0; up && steps <= entries_.size(); ++steps) {
      if (*up == id)
        return e;
      auto p = entries_.find(*up);
      up = p == entries_.end() ? std::nullopt : p->second.parent;
    }
  }
  e.parent = parent;
  entry& p = ensure(*parent, std::nullopt);
  if (p.children++ == 0)
    leaves_.erase({p.tick, *parent});
  return e;
}

void prefix_index::touch(block_id id, entry& e) {
  if (e.children == 0)
    leaves_.erase({e.tick, id});
  e.tick = ++clock_;
  if (e.children == 0)
    leaves_.emplace(e.tick, id);
}

void prefix_index::add(holder_idx hi, tier t, block_id id, std::optional<block_id> parent) {
  entry& e = ensure(id, parent);
  auto p = std::find_if(e.holders.begin(), e.holders.end(), [hi](auto& x) { return x.first == hi; });
  if (p == e.holders.end()) {
    e.holders.emplace_back(hi, bit(t));
    ++references_;
  } else {
    p->second |= bit(t);
  }
  holders_[hi].blocks[id] |= bit(t);
  touch(id, e);
}

void prefix_index::remove_ref(holder_idx hi, block_id id, uint8_t mask) {
  auto it = entries_.find(id);
  if (it == entries_.end())
    return;
  auto& hs = it->second.holders;
  auto p = std::find_if(hs.begin(), hs.end(), [hi](auto& x) { return x.first == hi; });
  if (p == hs.end())
    return;
  p->second &= static_cast<uint8_t>(~mask);
  auto& blocks = holders_[hi].blocks;
  if (p->second == 0) {
    hs.erase(p);
    --references_;
    blocks.erase(id);
  } else {
    blocks[id] &= static_cast<uint8_t>(~mask);
  }
  collect(id);
}

void prefix_index::collect(block_id id) {
  for (;;) {
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.children > 0 || !it->second.holders.empty())
      return;
    auto parent = it->second.parent;
    erase_entry(it);
    if (!parent)
      return;
    id = *parent;
  }
}

void prefix_index::erase_entry(std::unordered_map<block_id, entry>::iterator it) {
  const block_id id = it->first;
  entry& e = it->second;
  leaves_.erase({e.tick, id});
  for (auto& [hi, mask] : e.holders) {
    holders_[hi].blocks.erase(id);
    --references_;
  }
  auto parent = e.parent;
  entries_.erase(it);
  if (!parent)
    return;
  auto p = entries_.find(*parent);
  if (p != entries_.end() && --p->second.children == 0)
    leaves_.emplace(p->second.tick, *parent);
}

void prefix_index::enforce_capacity() {
  while (entries_.size() > capacity_ && !leaves_.empty()) {
    auto victim = leaves_.begin()->second;
    auto it = entries_.find(victim);
    auto parent = it->second.parent;
    erase_entry(it);
    ++evictions_;
    if (parent)
      collect(*parent); // a holderless ghost left as a leaf is useless
  }
}

apply_outcome prefix_index::store(const holder_ref& h, uint64_t epoch, tier t,
                                  std::span<const chain> chains) {
  auto hi = holder_for(h);
  auto out = admit(hi, epoch);
  if (out == apply_outcome::stale)
    return out;
  for (auto& c : chains) {
    auto prev = c.parent;
    for (auto id : c.ids) {
      add(hi, t, id, prev);
      prev = id;
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
  for (auto id : ids)
    remove_ref(hi, id, bit(t));
  return out;
}

size_t prefix_index::drop_node(const std::string& node) {
  size_t dropped = 0;
  for (holder_idx hi = 0; hi < holders_.size(); ++hi) {
    auto& h = holders_[hi];
    if (!h.live || h.ref.node != node)
      continue;
    dropped += h.blocks.size();
    clear_holder(hi);
    holder_by_name_.erase(key_of(h.ref.node, h.ref.actor));
    h = holder{};
    free_holders_.push_back(hi);
  }
  return dropped;
}

match_result prefix_index::match(std::span<const block_id> ids) {
  ++queries_;
  match_result out;
  if (ids.empty())
    return out;
  // One pass down the chain: `alive` holds every holder that held all blocks so far;
  // a holder missing block i leaves with a match of i blocks.
  const size_t slots = holders_.size();
  seen_at_.assign(slots, 0);
  slowest_.assign(slots, 0);
  std::vector<uint8_t> tier_here(slots, 0);
  std::vector<holder_idx> alive, next;
  std::vector<std::pair<holder_idx, uint32_t>> ended;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = entries_.find(ids[i]);
    if (it == entries_.end()) {
      for (auto h : alive)
        ended.emplace_back(h, static_cast<uint32_t>(i));
      alive.clear();
      break;
    }
    auto& e = it->second;
    const auto stamp = static_cast<uint32_t>(i + 1);
    for (auto& [h, mask] : e.holders) {
      seen_at_[h] = stamp;
      tier_here[h] = fastest(mask);
    }
    next.clear();
    if (i == 0) {
      for (auto& [h, mask] : e.holders) {
        next.push_back(h);
        slowest_[h] = tier_here[h];
      }
    } else {
      for (auto h : alive) {
        if (seen_at_[h] == stamp) {
          next.push_back(h);
          slowest_[h] = std::max(slowest_[h], tier_here[h]);
        } else {
          ended.emplace_back(h, static_cast<uint32_t>(i));
        }
      }
    }
    alive.swap(next);
    if (alive.empty())
      break;
    touch(ids[i], e);
  }
  for (auto h : alive)
    ended.emplace_back(h, static_cast<uint32_t>(ids.size()));

  for (auto& [h, n] : ended) {
    if (n == 0)
      continue;
    out.nodes.push_back({holders_[h].ref, n, static_cast<tier>(slowest_[h])});
  }
  std::sort(out.nodes.begin(), out.nodes.end(), [](const node_match& a, const node_match& b) {
    if (a.blocks != b.blocks)
      return a.blocks > b.blocks;
    return std::tie(a.holder.cluster, a.holder.node, a.holder.actor) <
           std::tie(b.holder.cluster, b.holder.node, b.holder.actor);
  });
  std::map<std::string, size_t> by_cluster;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    auto& n = out.nodes[i];
    auto [c, fresh] = by_cluster.try_emplace(n.holder.cluster, out.clusters.size());
    if (fresh)
      out.clusters.push_back({n.holder.cluster, n.blocks, {}});
    auto& cm = out.clusters[c->second];
    if (n.blocks == cm.blocks) // nodes are sorted longest first
      cm.best.push_back(i);
  }
  std::stable_sort(out.clusters.begin(), out.clusters.end(),
                   [](const cluster_match& a, const cluster_match& b) {
                     if (a.blocks != b.blocks)
                       return a.blocks > b.blocks;
                     return a.cluster < b.cluster;
                   });
  out.longest = out.nodes.empty() ? 0 : out.nodes.front().blocks;
  hit_blocks_ += out.longest;
  return out;
}

size_t prefix_index::blocks_of(const std::string& node, const std::string& actor) const {
  auto i = holder_by_name_.find(key_of(node, actor));
  return i == holder_by_name_.end() ? 0 : holders_[i->second].blocks.size();
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
  s.entries = entries_.size();
  s.holders = holder_by_name_.size();
  s.references = references_;
  s.evictions = evictions_;
  s.queries = queries_;
  s.hit_blocks = hit_blocks_;
  s.stale_reports = stale_;
  return s;
}

} // namespace prfaas::directory

#include "prfaas/engine/block_pool.hpp"

#include <string>

namespace prfaas::engine {

namespace {

std::string key_str(const pool_key& k) {
  return std::string(k.kind == entry_kind::kv ? "kv block " : "checkpoint ") + std::to_string(k.id);
}

} // namespace

block_pool::block_pool(pool_config config, pool_listener listener)
    : config_(config), listener_(std::move(listener)) {
  if (config_.checkpoint_blocks == 0)
    config_.checkpoint_blocks = 1;
}

void block_pool::emit(pool_event::type what, const pool_key& key, std::optional<block_id> parent) {
  if (listener_)
    listener_(pool_event{what, key, parent});
}

std::optional<pool_key> block_pool::dependency_of(const pool_key& key, const entry& e) const {
  if (key.kind == entry_kind::checkpoint)
    return pool_key{key.id, entry_kind::kv};
  if (e.parent)
    return pool_key{*e.parent, entry_kind::kv};
  return std::nullopt;
}

void block_pool::refresh_lru(const pool_key& key, entry& e) {
  const bool evictable = e.refs == 0 && !e.pinned && e.children == 0;
  if (evictable && !e.in_lru) {
    lru_.emplace(e.tick, key);
    e.in_lru = true;
  } else if (!evictable && e.in_lru) {
    lru_.erase({e.tick, key});
    e.in_lru = false;
  }
}

void block_pool::touch(const pool_key& key, entry& e) {
  if (e.in_lru)
    lru_.erase({e.tick, key});
  e.tick = ++counter_;
  if (e.in_lru)
    lru_.emplace(e.tick, key);
}

void block_pool::evict(pool_key key) { // by value: callers pass a reference into lru_
  auto it = entries_.find(key);
  entry& e = it->second;
  if (e.in_lru)
    lru_.erase({e.tick, key});
  const auto dep = dependency_of(key, e);
  const auto parent = e.parent;
  used_ -= e.cost;
  entries_.erase(it);
  ++counters_.evictions;
  if (dep) {
    auto d = entries_.find(*dep);
    if (d != entries_.end()) {
      --d->second.children;
      refresh_lru(d->first, d->second);
    }
  }
  emit(pool_event::type::evicted, key, parent);
}

bool block_pool::make_room(uint64_t blocks) {
  if (blocks > config_.capacity_blocks)
    return false;
  while (config_.capacity_blocks - used_ < blocks) {
    if (lru_.empty())
      return false;
    evict(lru_.begin()->second);
  }
  return true;
}

result<void> block_pool::insert(const pool_key& key, std::optional<pool_key> depends_on,
                                payload_ptr p, uint32_t cost) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    ++counters_.duplicate_inserts;
    touch(key, it->second);
    return {};
  }
  entry* dep = nullptr;
  if (depends_on) {
    auto d = entries_.find(*depends_on);
    if (d == entries_.end()) {
      ++counters_.insert_rejects;
      return make_error("pool: cannot insert " + key_str(key) + ": " + key_str(*depends_on) +
                        " it depends on is not cached");
    }
    dep = &d->second;
    ++dep->refs; // protect the dependency while making room
    refresh_lru(*depends_on, *dep);
  }
  const bool fits = make_room(cost);
  if (dep) {
    --dep->refs;
    refresh_lru(*depends_on, *dep);
  }
  if (!fits) {
    ++counters_.insert_rejects;
    return make_error("pool: no room for " + key_str(key) + " (" + std::to_string(used_) + " of " +
                      std::to_string(config_.capacity_blocks) + " blocks used, none evictable)");
  }
  entry e;
  if (key.kind == entry_kind::kv && depends_on)
    e.parent = depends_on->id;
  e.payload = std::move(p);
  e.cost = cost;
  e.tick = ++counter_;
  auto [it, _] = entries_.emplace(key, std::move(e));
  used_ += cost;
  ++counters_.inserts;
  if (dep) {
    ++dep->children;
    refresh_lru(*depends_on, *dep);
  }
  refresh_lru(key, it->second);
  emit(pool_event::type::stored, key, it->second.parent);
  return {};
}

result<void> block_pool::insert_kv(block_id id, std::optional<block_id> parent,
                                   payload_ptr payload) {
  std::optional<pool_key> dep;
  if (parent)
    dep = pool_key{*parent, entry_kind::kv};
  return insert(pool_key{id, entry_kind::kv}, dep, std::move(payload), 1);
}

result<void> block_pool::insert_checkpoint(block_id id, payload_ptr payload) {
  return insert(pool_key{id, entry_kind::checkpoint}, pool_key{id, entry_kind::kv},
                std::move(payload), config_.checkpoint_blocks);
}

prefix_match block_pool::match(std::span<const block_id> ids) {
  prefix_match m;
  ++counters_.lookups;
  for (block_id id : ids) {
    auto it = entries_.find(pool_key{id, entry_kind::kv});
    if (it == entries_.end())
      break;
    touch(it->first, it->second);
    ++m.kv_blocks;
  }
  for (uint32_t j = m.kv_blocks; j > 0; --j) {
    auto it = entries_.find(pool_key{ids[j - 1], entry_kind::checkpoint});
    if (it != entries_.end()) {
      touch(it->first, it->second);
      m.reuse_blocks = j;
      break;
    }
  }
  counters_.hit_blocks += m.kv_blocks;
  counters_.miss_blocks += ids.size() - m.kv_blocks;
  return m;
}

payload_ptr block_pool::payload(const pool_key& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.payload;
}

result<void> block_pool::acquire(const pool_key& key) {
  auto it = entries_.find(key);
  if (it == entries_.end())
    return make_error("pool: cannot acquire " + key_str(key) + ": not cached");
  ++it->second.refs;
  refresh_lru(key, it->second);
  return {};
}

void block_pool::release(const pool_key& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.refs == 0)
    return;
  --it->second.refs;
  refresh_lru(key, it->second);
}

result<void> block_pool::acquire_prefix(std::span<const block_id> ids, uint32_t blocks) {
  if (blocks == 0)
    return {};
  if (blocks > ids.size())
    return make_error("pool: prefix of " + std::to_string(blocks) + " blocks exceeds " +
                      std::to_string(ids.size()) + " ids");
  for (uint32_t i = 0; i < blocks; ++i)
    if (!contains({ids[i], entry_kind::kv}))
      return make_error("pool: cannot acquire prefix: " + key_str({ids[i], entry_kind::kv}) +
                        " not cached");
  if (!contains({ids[blocks - 1], entry_kind::checkpoint}))
    return make_error("pool: cannot acquire prefix: " +
                      key_str({ids[blocks - 1], entry_kind::checkpoint}) + " not cached");
  for (uint32_t i = 0; i < blocks; ++i)
    (void)acquire({ids[i], entry_kind::kv});
  (void)acquire({ids[blocks - 1], entry_kind::checkpoint});
  return {};
}

void block_pool::release_prefix(std::span<const block_id> ids, uint32_t blocks) {
  if (blocks == 0 || blocks > ids.size())
    return;
  release({ids[blocks - 1], entry_kind::checkpoint});
  for (uint32_t i = 0; i < blocks; ++i)
    release({ids[i], entry_kind::kv});
}

result<std::vector<kv_chunk>> block_pool::collect_reuse(std::span<const block_id> ids,
                                                        uint32_t blocks) const {
  std::vector<kv_chunk> out;
  if (blocks > ids.size())
    return make_error("pool: prefix of " + std::to_string(blocks) + " blocks exceeds ids");
  for (uint32_t i = 0; i <= blocks && blocks > 0; ++i) {
    const pool_key key = i < blocks ? pool_key{ids[i], entry_kind::kv}
                                    : pool_key{ids[blocks - 1], entry_kind::checkpoint};
    auto p = payload(key);
    if (!p)
      return make_error("pool: no payload for " + key_str(key));
    out.insert(out.end(), p->begin(), p->end());
  }
  return out;
}

result<void> block_pool::pin(const pool_key& key) {
  auto it = entries_.find(key);
  if (it == entries_.end())
    return make_error("pool: cannot pin " + key_str(key) + ": not cached");
  it->second.pinned = true;
  refresh_lru(key, it->second);
  return {};
}

void block_pool::unpin(const pool_key& key) {
  auto it = entries_.find(key);
  if (it == entries_.end())
    return;
  it->second.pinned = false;
  refresh_lru(key, it->second);
}

result<void> block_pool::allocate_transfer(uint64_t transfer_id, uint64_t blocks, nanos expires_at,
                                           payload_ptr payload) {
  if (transfers_.count(transfer_id)) {
    ++counters_.transfer_rejects;
    return make_error("pool: transfer " + std::to_string(transfer_id) + " already allocated");
  }
  if (!make_room(blocks)) {
    ++counters_.transfer_rejects;
    return make_error("pool: no room for transfer " + std::to_string(transfer_id) + " (" +
                      std::to_string(blocks) + " blocks; " + std::to_string(used_) + " of " +
                      std::to_string(config_.capacity_blocks) + " used, none evictable)");
  }
  transfers_.emplace(transfer_id, transfer{blocks, expires_at, std::move(payload)});
  used_ += blocks;
  ++counters_.transfers_allocated;
  return {};
}

bool block_pool::ack_transfer(uint64_t transfer_id) {
  auto it = transfers_.find(transfer_id);
  if (it == transfers_.end())
    return false;
  used_ -= it->second.blocks;
  transfers_.erase(it);
  ++counters_.transfers_acked;
  return true;
}

size_t block_pool::expire_transfers(nanos now) {
  size_t n = 0;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    if (it->second.expires_at <= now) {
      used_ -= it->second.blocks;
      it = transfers_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  counters_.transfers_expired += n;
  return n;
}

size_t block_pool::evict_unused() {
  size_t n = 0;
  while (!lru_.empty()) {
    evict(lru_.begin()->second);
    ++n;
  }
  return n;
}

std::vector<pool_key> block_pool::snapshot() const {
  std::vector<pool_key> out;
  out.reserve(entries_.size());
  for (const auto& [k, _] : entries_)
    out.push_back(k);
  return out;
}

pool_stats block_pool::stats() const {
  pool_stats s = counters_;
  s.capacity_blocks = config_.capacity_blocks;
  s.used_blocks = used_;
  s.used_bytes = used_ * config_.block_bytes;
  s.kv_entries = s.checkpoint_entries = s.pinned_entries = s.referenced_entries = 0;
  for (const auto& [k, e] : entries_) {
    (k.kind == entry_kind::kv ? s.kv_entries : s.checkpoint_entries) += 1;
    s.pinned_entries += e.pinned ? 1 : 0;
    s.referenced_entries += e.refs > 0 ? 1 : 0;
  }
  s.transfer_blocks = 0;
  for (const auto& [_, t] : transfers_)
    s.transfer_blocks += t.blocks;
  s.transfers_open = transfers_.size();
  return s;
}

} // namespace prfaas::engine

// Randomised, seeded property test of the hybrid prefix cache pool against a simple
// model: ≥ 10,000 operations per seed; invariants checked after every operation.
#include "engine_test_util.hpp"

#include "prfaas/engine/block_pool.hpp"

#include <map>
#include <set>

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

/// What the test knows independently of the pool's internals.
struct model {
  std::map<pool_key, std::optional<block_id>> contents; ///< rebuilt from events only
  std::map<pool_key, int> refs;                         ///< acquires minus releases
  std::set<pool_key> pinned;
  std::map<uint64_t, uint64_t> transfers; ///< id → blocks
};

bool has_dependants(const model& m, const pool_key& k) {
  if (k.kind == entry_kind::checkpoint)
    return false;
  if (m.contents.count({k.id, entry_kind::checkpoint}))
    return true;
  for (const auto& [key, parent] : m.contents)
    if (key.kind == entry_kind::kv && parent == k.id)
      return true;
  return false;
}

void run(uint64_t seed, int ops) {
  xoshiro256 rng(seed);
  const uint32_t cp_cost = 1 + static_cast<uint32_t>(rng.below(3));
  block_pool* pool_ptr = nullptr;
  model m;
  std::string violation;
  // Events must be consistent with the pool at the moment they fire.
  block_pool pool({64, 512, cp_cost}, [&](const pool_event& e) {
    if (e.what == pool_event::type::stored) {
      if (m.contents.count(e.key))
        violation = "stored twice";
      m.contents[e.key] = e.parent;
    } else {
      if (!m.contents.count(e.key))
        violation = "evicted an entry never stored";
      if (m.refs.count(e.key) && m.refs.at(e.key) > 0)
        violation = "evicted a referenced entry";
      if (m.pinned.count(e.key))
        violation = "evicted a pinned entry";
      m.contents.erase(e.key);
      if (has_dependants(m, e.key))
        violation = "evicted an entry whose dependants remain";
      if (pool_ptr->contains(e.key))
        violation = "evicted event for an entry still present";
    }
  });
  pool_ptr = &pool;
  // Chains: a few "documents", each a chain of ids; ids are (doc << 16) | index.
  auto id_of = [](uint64_t doc, uint64_t i) { return (doc << 16) | i; };
  uint64_t next_transfer = 1;
  int64_t now = 0;
  for (int op = 0; op < ops; ++op) {
    const uint64_t doc = rng.below(12), i = rng.below(10);
    const pool_key key{id_of(doc, i), rng.below(4) == 0 ? entry_kind::checkpoint : entry_kind::kv};
    const uint64_t before_used = pool.used_blocks();
    switch (rng.below(10)) {
    case 0:
    case 1:
    case 2: { // insert (kv with its parent, or checkpoint)
      const bool dep_cached = key.kind == entry_kind::kv
                                  ? i == 0 || pool.contains({id_of(doc, i - 1), entry_kind::kv})
                                  : pool.contains({key.id, entry_kind::kv});
      const bool existed = pool.contains(key);
      auto r = key.kind == entry_kind::kv
                   ? pool.insert_kv(key.id, i == 0 ? std::nullopt
                                                   : std::optional<block_id>(id_of(doc, i - 1)))
                   : pool.insert_checkpoint(key.id);
      if (!dep_cached && !existed)
        REQUIRE_FALSE(r.ok());
      if (r.ok())
        REQUIRE(pool.contains(key));
      break;
    }
    case 3: { // match a document prefix
      std::vector<block_id> ids;
      for (uint64_t j = 0; j < 10; ++j)
        ids.push_back(id_of(doc, j));
      const auto mt = pool.match(ids);
      for (uint32_t j = 0; j < mt.kv_blocks; ++j)
        REQUIRE(m.contents.count({ids[j], entry_kind::kv}));
      if (mt.kv_blocks < 10)
        REQUIRE_FALSE(m.contents.count({ids[mt.kv_blocks], entry_kind::kv}));
      if (mt.reuse_blocks > 0)
        REQUIRE(m.contents.count({ids[mt.reuse_blocks - 1], entry_kind::checkpoint}));
      break;
    }
    case 4: // acquire
      if (pool.acquire(key).ok())
        ++m.refs[key];
      else
        REQUIRE_FALSE(m.contents.count(key));
      break;
    case 5: // release one reference (of anything referenced, to keep refs moving)
      if (!m.refs.empty()) {
        auto it = m.refs.begin();
        std::advance(it, static_cast<long>(rng.below(m.refs.size())));
        pool.release(it->first);
        if (--it->second == 0)
          m.refs.erase(it);
      }
      break;
    case 6: // pin / unpin
      if (m.pinned.count(key)) {
        pool.unpin(key);
        m.pinned.erase(key);
      } else if (pool.pin(key).ok()) {
        m.pinned.insert(key);
      }
      break;
    case 7: { // transfer allocation with a lease
      const uint64_t blocks = 1 + rng.below(12);
      const uint64_t id = next_transfer++;
      if (pool.allocate_transfer(id, blocks, nanos{now + 1 + static_cast<int64_t>(rng.below(50))})
              .ok())
        m.transfers[id] = blocks;
      break;
    }
    case 8: // ack a transfer: frees exactly its blocks
      if (!m.transfers.empty()) {
        auto it = m.transfers.begin();
        std::advance(it, static_cast<long>(rng.below(m.transfers.size())));
        REQUIRE(pool.ack_transfer(it->first));
        REQUIRE(pool.used_blocks() == before_used - it->second);
        REQUIRE_FALSE(pool.has_transfer(it->first));
        m.transfers.erase(it);
      }
      break;
    default: { // time passes; expired leases are freed
      now += static_cast<int64_t>(rng.below(20));
      pool.expire_transfers(nanos{now});
      for (auto it = m.transfers.begin(); it != m.transfers.end();)
        it = pool.has_transfer(it->first) ? std::next(it) : m.transfers.erase(it);
      break;
    }
    }
    INFO("seed " << seed << " op " << op);
    REQUIRE(violation.empty());
    // Invariants.
    REQUIRE(pool.used_blocks() <= pool.config().capacity_blocks);
    uint64_t expect_used = 0;
    for (const auto& [k, _] : m.contents)
      expect_used += k.kind == entry_kind::kv ? 1 : cp_cost;
    for (const auto& [_, b] : m.transfers)
      expect_used += b;
    REQUIRE(pool.used_blocks() == expect_used);
    for (const auto& [k, n] : m.refs)
      REQUIRE(pool.contains(k));
    for (const auto& k : m.pinned)
      REQUIRE(pool.contains(k));
    for (const auto& [id, _] : m.transfers)
      REQUIRE(pool.has_transfer(id));
    if (op % 97 == 0) { // events replayed == contents, and prefix property holds
      auto snap = pool.snapshot();
      REQUIRE(snap.size() == m.contents.size());
      for (const auto& k : snap) {
        REQUIRE(m.contents.count(k));
        const auto& parent = m.contents[k];
        if (k.kind == entry_kind::kv && parent)
          REQUIRE(pool.contains({*parent, entry_kind::kv}));
        if (k.kind == entry_kind::checkpoint)
          REQUIRE(pool.contains({k.id, entry_kind::kv}));
      }
      const auto s = pool.stats();
      REQUIRE(s.kv_entries + s.checkpoint_entries == m.contents.size());
      REQUIRE(s.transfers_open == m.transfers.size());
    }
  }
  // Everything unreferenced can be drained; what stays is referenced or pinned (or
  // an ancestor of such an entry).
  for (const auto& [k, n] : m.refs)
    for (int j = 0; j < n; ++j)
      pool.release(k);
  m.refs.clear();
  for (const auto& k : m.pinned)
    pool.unpin(k);
  m.pinned.clear();
  pool.evict_unused();
  REQUIRE(violation.empty());
  REQUIRE(pool.snapshot().empty());
  REQUIRE(m.contents.empty());
}

} // namespace

TEST_CASE("pool property test seed 1") {
  run(1, 12000);
}
TEST_CASE("pool property test seed 2") {
  run(2, 12000);
}
TEST_CASE("pool property test seed 3") {
  run(3, 12000);
}

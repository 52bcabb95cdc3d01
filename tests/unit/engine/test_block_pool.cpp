#include "engine_test_util.hpp"

#include "prfaas/engine/block_pool.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;
using namespace std::chrono_literals;

namespace {

struct recorder {
  std::vector<pool_event> events;
  pool_listener listener() {
    return [this](const pool_event& e) { events.push_back(e); };
  }
};

pool_key kv(block_id id) {
  return {id, entry_kind::kv};
}

} // namespace

TEST_CASE("pool keeps the prefix property") {
  block_pool pool({10, 4096, 1});
  CHECK(contains(pool.insert_kv(2, 1).message(), "kv block 1 it depends on is not cached"));
  CHECK(contains(pool.insert_checkpoint(1).message(), "not cached"));
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(2, 1).ok());
  REQUIRE(pool.insert_checkpoint(2).ok());
  const block_id ids[3] = {1, 2, 3};
  const auto m = pool.match(ids);
  CHECK(m.kv_blocks == 2);
  CHECK(m.reuse_blocks == 2);
  const block_id other[2] = {9, 1};
  CHECK(pool.match(other).kv_blocks == 0);
  const auto s = pool.stats();
  CHECK(s.lookups == 2);
  CHECK(s.hit_blocks == 2);
  CHECK(s.miss_blocks == 3);
  CHECK(s.insert_rejects == 2);
  CHECK(s.used_bytes == 3 * 4096);
}

TEST_CASE("pool reuse needs a checkpoint at the exact block") {
  block_pool pool({10, 0, 2});
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(2, 1).ok());
  REQUIRE(pool.insert_kv(3, 2).ok());
  REQUIRE(pool.insert_checkpoint(1).ok());
  const block_id ids[3] = {1, 2, 3};
  auto m = pool.match(ids);
  CHECK(m.kv_blocks == 3);
  CHECK(m.reuse_blocks == 1);     // only the state after block 1 exists
  CHECK(pool.used_blocks() == 5); // checkpoints cost 2 blocks here
  CHECK_FALSE(pool.acquire_prefix(ids, 2).ok());
  CHECK(pool.acquire_prefix(ids, 1).ok());
}

TEST_CASE("pool evicts least recently used leaves first") {
  recorder rec;
  block_pool pool({4, 0, 1}, rec.listener());
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(2, 1).ok());
  REQUIRE(pool.insert_kv(10, std::nullopt).ok());
  REQUIRE(pool.insert_kv(11, 10).ok());
  const block_id a[1] = {1};
  (void)pool.match(a); // block 1 is now the most recent, but its child 2 keeps it
  REQUIRE(pool.insert_kv(20, std::nullopt).ok()); // evicts 2 (oldest leaf)
  CHECK_FALSE(pool.contains(kv(2)));
  CHECK(pool.contains(kv(1)));
  REQUIRE(pool.insert_kv(21, 20).ok()); // leaves: 1 (touched), 11 (older) → evicts 11
  CHECK_FALSE(pool.contains(kv(11)));
  CHECK(pool.contains(kv(1)));
  CHECK(pool.stats().evictions == 2);
  REQUIRE(rec.events.size() == 8);
  CHECK(rec.events[4].what == pool_event::type::evicted);
  CHECK(rec.events[4].key == kv(2));
  CHECK(rec.events[4].parent == block_id{1});
}

TEST_CASE("pool never evicts referenced or pinned entries") {
  block_pool pool({3, 0, 1});
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(2, std::nullopt).ok());
  REQUIRE(pool.insert_kv(3, std::nullopt).ok());
  REQUIRE(pool.acquire(kv(1)).ok());
  REQUIRE(pool.pin(kv(2)).ok());
  REQUIRE(pool.insert_kv(4, std::nullopt).ok()); // only 3 is evictable
  CHECK_FALSE(pool.contains(kv(3)));
  REQUIRE(pool.acquire(kv(4)).ok());
  auto full = pool.insert_kv(5, std::nullopt);
  CHECK(contains(full.message(), "no room"));
  CHECK(pool.contains(kv(1)));
  CHECK(pool.contains(kv(2)));
  pool.release(kv(1));
  REQUIRE(pool.insert_kv(5, std::nullopt).ok());
  CHECK_FALSE(pool.contains(kv(1)));
  pool.unpin(kv(2));
  CHECK(pool.evict_unused() == 2); // 2 and 5; 4 is still acquired
  CHECK(pool.contains(kv(4)));
}

TEST_CASE("pool inserting a child never evicts its parent") {
  block_pool pool({2, 0, 1});
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(7, std::nullopt).ok());
  const block_id a[1] = {7};
  (void)pool.match(a);                // 1 is the LRU leaf...
  REQUIRE(pool.insert_kv(2, 1).ok()); // ...but it is the parent: 7 goes instead
  CHECK(pool.contains(kv(1)));
  CHECK_FALSE(pool.contains(kv(7)));
}

TEST_CASE("pool transfer blocks live until ack or lease expiry") {
  block_pool pool({10, 0, 1});
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.acquire(kv(1)).ok());
  REQUIRE(pool.allocate_transfer(100, 6, 5s).ok());
  CHECK(contains(pool.allocate_transfer(100, 1, 5s).message(), "already allocated"));
  REQUIRE(pool.allocate_transfer(101, 3, 9s).ok());
  CHECK(pool.used_blocks() == 10);
  CHECK(contains(pool.allocate_transfer(102, 1, 9s).message(), "no room"));
  CHECK_FALSE(pool.has_transfer(102));
  CHECK(pool.ack_transfer(100));
  CHECK_FALSE(pool.ack_transfer(100));
  CHECK(pool.used_blocks() == 4);
  CHECK(pool.expire_transfers(8s) == 0);
  CHECK(pool.expire_transfers(9s) == 1);
  CHECK(pool.used_blocks() == 1);
  // A transfer may push out unreferenced prefix blocks.
  pool.release(kv(1));
  REQUIRE(pool.allocate_transfer(103, 10, 20s).ok());
  CHECK_FALSE(pool.contains(kv(1)));
  const auto s = pool.stats();
  CHECK(s.transfers_acked == 1);
  CHECK(s.transfers_expired == 1);
  CHECK(s.transfer_rejects == 2);
  CHECK(s.transfer_blocks == 10);
}

TEST_CASE("pool duplicate insert refreshes without an event") {
  recorder rec;
  block_pool pool({4, 0, 1}, rec.listener());
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  REQUIRE(pool.insert_kv(1, std::nullopt).ok());
  CHECK(rec.events.size() == 1);
  CHECK(pool.stats().duplicate_inserts == 1);
  CHECK(pool.used_blocks() == 1);
  CHECK(pool.snapshot().size() == 1);
  CHECK(pool.payload(kv(1)) == nullptr);
  auto p = std::make_shared<const block_payload>(1);
  REQUIRE(pool.insert_kv(2, 1, p).ok());
  CHECK(pool.payload(kv(2)) == p);
}

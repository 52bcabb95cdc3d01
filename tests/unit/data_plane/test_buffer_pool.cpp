// The buffer pool as a plain class: bounds, reuse, sharing, waiting, and a property
// test that drives it to exhaustion under random sizes and drops and checks that every
// buffer comes back.

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "prfaas/runtime/buffer_pool.hpp"

using namespace prfaas;
using namespace std::chrono_literals;

namespace {

buffer_pool_config small(uint32_t buffers, uint64_t bytes = 64 << 10) {
  buffer_pool_config c;
  c.buffers = buffers;
  c.buffer_bytes = bytes;
  c.prefault = false;
  return c;
}

} // namespace

TEST_CASE("buffer pool: hands out at most its buffers, and a returned one is reused first") {
  auto pool = buffer_pool::create(small(3), "t");
  REQUIRE(pool->capacity() == 3);
  REQUIRE(pool->buffer_bytes() == 64u << 10);
  auto a = pool->try_acquire();
  auto b = pool->try_acquire();
  auto c = pool->try_acquire();
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  std::set<const std::byte*> distinct{a.data(), b.data(), c.data()};
  CHECK(distinct.size() == 3);
  CHECK(pool->available() == 0);
  CHECK_FALSE(pool->try_acquire());
  CHECK(pool->stats().exhausted == 1);
  const auto* warm = b.data();
  b = pool_buffer{}; // dropped: back to the pool
  CHECK(pool->available() == 1);
  auto again = pool->try_acquire();
  REQUIRE(again);
  CHECK(again.data() == warm); // the most recently used buffer (still in cache)
  CHECK(pool->stats().peak_in_use == 3);
  CHECK(pool->stats().acquired == 4);
}

TEST_CASE("buffer pool: a shared buffer returns when its last reference goes") {
  std::atomic<int> released{0};
  auto pool = buffer_pool::create(small(1), "t");
  pool->on_release([&] { ++released; });
  auto b = pool->try_acquire();
  REQUIRE(b);
  std::memset(b.data(), 7, 100);
  b.resize(100);
  CHECK_THROWS_AS(b.resize(b.capacity() + 1), std::length_error);
  bulk_ptr shared = std::move(b).share();
  CHECK_FALSE(b); // the handle gave its buffer to the bulk
  REQUIRE(shared);
  CHECK(shared->size() == 100);
  CHECK(shared->pooled());
  CHECK(shared->data()[99] == std::byte{7});
  auto copy = shared;
  shared.reset();
  CHECK(pool->available() == 0); // `copy` still holds it
  CHECK(released == 0);
  copy.reset();
  CHECK(pool->available() == 1);
  CHECK(released == 1);
}

TEST_CASE("buffer pool: acquire waits for a buffer another thread returns, and times out") {
  auto pool = buffer_pool::create(small(1), "t");
  auto held = pool->try_acquire();
  REQUIRE(held);
  CHECK_FALSE(pool->acquire(20ms)); // none comes back
  std::thread giver{[&] {
    std::this_thread::sleep_for(50ms);
    held = pool_buffer{};
  }};
  auto got = pool->acquire(60s);
  giver.join();
  CHECK(got);
  CHECK(pool->stats().exhausted == 1);
}

TEST_CASE("buffer pool: buffers outlive the pool's owner") {
  auto pool = buffer_pool::create(small(2), "t");
  auto b = pool->try_acquire();
  REQUIRE(b);
  std::weak_ptr<buffer_pool> watch = pool;
  pool.reset();
  CHECK_FALSE(watch.expired()); // the buffer keeps the mapping alive
  std::memset(b.data(), 1, b.capacity());
  b = pool_buffer{};
  CHECK(watch.expired());
}

TEST_CASE("buffer pool: pre-faulted and page-rounded as configured") {
  buffer_pool_config c = small(2, 1000);
  c.prefault = true;
  auto pool = buffer_pool::create(c, "t");
  CHECK(pool->buffer_bytes() % 4096 == 0); // rounded up to a page
  CHECK(pool->buffer_bytes() >= 1000);
  CHECK(pool->stats().prefaulted);
  auto none = buffer_pool::create(small(0), "empty");
  CHECK(none->capacity() == 0);
  CHECK_FALSE(none->try_acquire());
}

TEST_CASE("buffer pool: random takes, shares, copies and drops never lose a buffer") {
  // Property: under any order of operations, buffers out + available == capacity,
  // no buffer is handed out twice at once, and all come back at the end.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng{seed};
    const uint32_t cap = 1 + static_cast<uint32_t>(rng() % 6);
    auto pool = buffer_pool::create(small(cap, 8192), "p");
    std::vector<pool_buffer> owned;
    std::vector<bulk_ptr> shared;
    uint64_t exhausted = 0;
    for (int step = 0; step < 500; ++step) {
      switch (rng() % 5) {
      case 0:
      case 1: { // take one (a transfer's chunk arrives), fill a random size
        auto b = pool->try_acquire();
        if (!b) {
          ++exhausted;
          REQUIRE(owned.size() + shared.size() >= cap); // truly exhausted
          break;
        }
        b.resize(rng() % (b.capacity() + 1));
        owned.push_back(std::move(b));
        break;
      }
      case 2: // hand one to a sink (share), sometimes with an extra reference
        if (!owned.empty()) {
          auto i = rng() % owned.size();
          auto bulk = std::move(owned[i]).share();
          owned.erase(owned.begin() + static_cast<long>(i));
          shared.push_back(bulk);
          if (rng() % 2)
            shared.push_back(bulk);
        }
        break;
      case 3: // a cancel: drop an owned buffer
        if (!owned.empty())
          owned.erase(owned.begin() + static_cast<long>(rng() % owned.size()));
        break;
      case 4: // a sink lets go of one reference
        if (!shared.empty())
          shared.erase(shared.begin() + static_cast<long>(rng() % shared.size()));
        break;
      }
      std::set<const std::byte*> out;
      for (auto& b : owned)
        out.insert(b.data());
      for (auto& s : shared)
        out.insert(s->data());
      REQUIRE(out.size() + pool->available() == cap);
    }
    owned.clear();
    shared.clear();
    CHECK(pool->available() == cap);
    CHECK(pool->stats().exhausted == exhausted);
  }
}

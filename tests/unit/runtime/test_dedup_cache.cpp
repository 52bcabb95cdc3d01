#include <catch2/catch.hpp>

#include "prfaas/runtime/dedup_cache.hpp"

using namespace std::chrono_literals;
using prfaas::dedup_cache;

TEST_CASE("dedup: fresh, in progress, answered") {
  dedup_cache c{10s, 100};
  dedup_cache::time_point t0{};
  dedup_cache::key k{"a", 1, 42};
  const dedup_cache::answer* a = nullptr;
  CHECK(c.check(k, t0, &a) == dedup_cache::verdict::fresh);
  CHECK(c.check(k, t0 + 1s, &a) == dedup_cache::verdict::in_progress);
  c.complete(k, {"a", "resp", nullptr});
  REQUIRE(c.check(k, t0 + 2s, &a) == dedup_cache::verdict::answered);
  REQUIRE(a);
  CHECK(a->header == "resp");
  // Another incarnation or id is another request.
  CHECK(c.check({"a", 2, 42}, t0 + 2s, &a) == dedup_cache::verdict::fresh);
  CHECK(c.check({"a", 1, 43}, t0 + 2s, &a) == dedup_cache::verdict::fresh);
  CHECK(c.check({"b", 1, 42}, t0 + 2s, &a) == dedup_cache::verdict::fresh);
}

TEST_CASE("dedup: entries expire after the window") {
  dedup_cache c{10s, 100};
  dedup_cache::time_point t0{};
  dedup_cache::key k{"a", 1, 1};
  c.check(k, t0, nullptr);
  c.complete(k, {"a", "x", nullptr});
  CHECK(c.check(k, t0 + 9s, nullptr) == dedup_cache::verdict::answered);
  CHECK(c.check(k, t0 + 10s, nullptr) == dedup_cache::verdict::fresh);
}

TEST_CASE("dedup: memory is bounded by the capacity") {
  dedup_cache c{1h, 1000};
  dedup_cache::time_point t0{};
  for (uint64_t i = 1; i <= 100000; ++i) {
    c.check({"a", 1, i}, t0 + std::chrono::microseconds(i), nullptr);
    REQUIRE(c.size() <= 1000);
  }
  CHECK(c.evicted() == 99000);
  // The newest are still remembered, the oldest are not.
  CHECK(c.check({"a", 1, 100000}, t0 + 1s, nullptr) == dedup_cache::verdict::in_progress);
  CHECK(c.check({"a", 1, 1}, t0 + 1s, nullptr) == dedup_cache::verdict::fresh);
}

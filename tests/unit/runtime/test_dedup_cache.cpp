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
  c.complete(k, {"a", "resp", nullptr}, t0 + 1s);
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
  c.complete(k, {"a", "x", nullptr}, t0);
  CHECK(c.check(k, t0 + 9s, nullptr) == dedup_cache::verdict::answered);
  CHECK(c.check(k, t0 + 10s, nullptr) == dedup_cache::verdict::fresh);
}

TEST_CASE("dedup: a request that runs longer than the window is not run twice") {
  // A prefill order waiting 5 minutes in a queue is re-sent every retry interval by
  // its requester; every copy must stay a duplicate until the answer, and the answer
  // must be kept a window from when it was given.
  dedup_cache c{30s, 100};
  dedup_cache::time_point t0{};
  dedup_cache::key k{"gw", 1, 7};
  REQUIRE(c.check(k, t0, nullptr, t0 + 3600s) == dedup_cache::verdict::fresh);
  for (auto at = t0 + 500ms; at < t0 + 300s; at += 500ms)
    REQUIRE(c.check(k, at, nullptr) == dedup_cache::verdict::in_progress);
  c.complete(k, {"gw", "done", nullptr}, t0 + 300s);
  const dedup_cache::answer* a = nullptr;
  REQUIRE(c.check(k, t0 + 329s, &a) == dedup_cache::verdict::answered);
  CHECK(a->header == "done");
  CHECK(c.check(k, t0 + 331s, nullptr) == dedup_cache::verdict::fresh);
  CHECK(c.evicted() == 1);
}

TEST_CASE("dedup: a running request is forgotten once its requester stopped waiting") {
  dedup_cache c{10s, 100};
  dedup_cache::time_point t0{};
  dedup_cache::key k{"gw", 1, 8};
  c.check(k, t0, nullptr, t0 + 15s);
  // Past the window but before the deadline: still running, still a duplicate.
  CHECK(c.check(k, t0 + 12s, nullptr) == dedup_cache::verdict::in_progress);
  // Looked at again a window after 12 s: its deadline (15 s) has passed, so it is gone.
  CHECK(c.check(k, t0 + 21s, nullptr) == dedup_cache::verdict::in_progress);
  CHECK(c.check(k, t0 + 22s, nullptr) == dedup_cache::verdict::fresh);
  // Without a deadline (the default) a running entry expires with the window.
  dedup_cache::key k2{"gw", 1, 9};
  c.check(k2, t0 + 30s, nullptr);
  CHECK(c.check(k2, t0 + 39s, nullptr) == dedup_cache::verdict::in_progress);
  CHECK(c.check(k2, t0 + 40s, nullptr) == dedup_cache::verdict::fresh);
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

TEST_CASE("dedup: running requests held past the window still respect the capacity") {
  dedup_cache c{1s, 10};
  dedup_cache::time_point t0{};
  for (uint64_t i = 1; i <= 50; ++i) {
    c.check({"a", 1, i}, t0 + std::chrono::seconds(i), nullptr, t0 + 1h);
    REQUIRE(c.size() <= 10);
  }
  CHECK(c.check({"a", 1, 50}, t0 + 51s, nullptr) == dedup_cache::verdict::in_progress);
}

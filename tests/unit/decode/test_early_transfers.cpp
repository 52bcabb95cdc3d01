// early_transfers (actors/decode/early_transfers.hpp): KV transfers that reached the
// decode worker before their order wait within a count, a byte and a time bound.

#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "decode/early_transfers.hpp"

using prfaas::serving::early_transfers;
using namespace std::chrono_literals;
using parking = early_transfers<std::string>;
using strings = std::vector<std::string>;

namespace {
const parking::clock_type::time_point t0{};
}

TEST_CASE("a parked transfer is taken once by its order") {
  parking p{{.max_transfers = 4, .max_bytes = 100, .ttl = 30s}};
  CHECK(p.park("a", "kv of a", 10, t0).empty());
  CHECK(p.size() == 1);
  CHECK(p.bytes() == 10);
  auto t = p.take("a");
  REQUIRE(t);
  CHECK(*t == "kv of a");
  CHECK_FALSE(p.take("a"));
  CHECK(p.size() == 0);
  CHECK(p.bytes() == 0);
}

TEST_CASE("beyond its count or its bytes, the oldest transfers go first") {
  parking p{{.max_transfers = 2, .max_bytes = 100, .ttl = 30s}};
  p.park("a", "1", 10, t0);
  p.park("b", "2", 10, t0 + 1s);
  CHECK(p.park("c", "3", 10, t0 + 2s) == strings{"a"});
  CHECK(p.park("d", "4", 95, t0 + 3s) ==
        strings{"b", "c"}); // 3 > 2 transfers, then 10 + 95 > 100 bytes
  CHECK(p.size() == 1);
  CHECK(p.bytes() == 95);
  SECTION("one larger than the byte bound is not kept at all") {
    CHECK(p.park("huge", "5", 101, t0 + 4s) == strings{"huge"});
    CHECK(p.size() == 1);
    CHECK(p.take("d"));
  }
  SECTION("a second transfer of one request replaces the first") {
    CHECK(p.park("d", "4 again", 5, t0 + 4s).empty());
    CHECK(p.bytes() == 5);
    CHECK(*p.take("d") == "4 again");
  }
}

TEST_CASE("a transfer whose order does not come within the ttl is dropped") {
  parking p{{.max_transfers = 8, .max_bytes = 100, .ttl = 30s}};
  p.park("a", "1", 1, t0);
  p.park("b", "2", 1, t0 + 10s);
  CHECK(p.expire(t0 + 30s).empty());
  CHECK(p.expire(t0 + 31s) == strings{"a"});
  CHECK(p.expire(t0 + 41s) == strings{"b"});
  CHECK(p.size() == 0);
}

TEST_CASE("random parks, takes and expiries stay within the bounds and lose nothing silently") {
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng{seed};
    auto pick = [&](uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); };
    parking p{{.max_transfers = 5, .max_bytes = 50, .ttl = 10s}};
    std::map<std::string, uint64_t> parked; // the model: what must still be there
    auto now = t0;
    for (int step = 0; step < 400; ++step) {
      now += std::chrono::milliseconds(pick(1500));
      const std::string id = "r" + std::to_string(pick(12));
      switch (pick(4)) {
      case 0:
      case 1: {
        const uint64_t bytes = pick(30);
        parked.erase(id);
        parked[id] = bytes;
        for (auto& d : p.park(id, id, bytes, now))
          REQUIRE(parked.erase(d) == 1); // every drop is reported, once
        break;
      }
      case 2: {
        auto t = p.take(id);
        REQUIRE(t.has_value() == (parked.count(id) == 1));
        if (t)
          REQUIRE(*t == id);
        parked.erase(id);
        break;
      }
      default:
        for (auto& d : p.expire(now))
          REQUIRE(parked.erase(d) == 1);
      }
      uint64_t bytes = 0;
      for (auto& [_, b] : parked)
        bytes += b;
      REQUIRE(p.size() == parked.size());
      REQUIRE(p.bytes() == bytes);
      REQUIRE(p.size() <= 5);
      REQUIRE(p.bytes() <= 50);
    }
  }
}

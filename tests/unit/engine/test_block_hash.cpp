#include "engine_test_util.hpp"

#include "prfaas/engine/block_hash.hpp"

#include <xxhash.h>

using namespace prfaas::engine;
using namespace prfaas::engine::test;

TEST_CASE("block hash follows the documented chaining") {
  xoshiro256 rng(1);
  std::vector<token> t(100);
  for (auto& x : t)
    x = static_cast<token>(rng.next());
  block_hasher h(16, 99);
  const auto ids = h.hash(t);
  REQUIRE(ids.size() == 6); // 100 / 16: the partial 7th block has no id
  uint64_t prev = 99;
  for (size_t i = 0; i < ids.size(); ++i) {
    prev = XXH3_64bits_withSeed(t.data() + i * 16, 16 * sizeof(token), prev);
    CHECK(ids[i] == prev);
    CHECK(h.hash_block(i == 0 ? 99 : ids[i - 1], std::span(t).subspan(i * 16, 16)) == ids[i]);
  }
}

TEST_CASE("block hash ids identify prefixes") {
  xoshiro256 rng(2);
  std::vector<token> t(64 * 10);
  for (auto& x : t)
    x = static_cast<token>(rng.below(256));
  block_hasher h(64);
  const auto base = h.hash(t);
  for (size_t pos : {size_t{0}, size_t{200}, size_t{639}}) {
    auto u = t;
    u[pos] ^= 1;
    const auto ids = h.hash(u);
    const size_t changed = pos / 64;
    for (size_t i = 0; i < ids.size(); ++i)
      CHECK((ids[i] == base[i]) == (i < changed));
  }
  // A prompt extended by more tokens keeps its ids.
  auto longer = t;
  longer.insert(longer.end(), 100, 7);
  const auto ids = h.hash(longer);
  REQUIRE(ids.size() == 11);
  CHECK(std::equal(base.begin(), base.end(), ids.begin()));
  CHECK(h.hash(std::span(t).first(63)).empty());
  CHECK(block_hasher(64, 1).hash(t)[0] != base[0]);
  CHECK_THROWS_AS(block_hasher(0), std::invalid_argument);
}

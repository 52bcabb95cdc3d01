// block_table: ids whose 32-bit tags collide are told apart by their nodes (found,
// erased and matched right), and erasing from long probe runs keeps every other id
// reachable, through growth.

#include <algorithm>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "kv_directory/block_table.hpp"
#include "kv_directory/prefix_index.hpp"

using namespace prfaas::directory;

namespace {

/// Two ids with the same tag, found by a birthday search.
std::pair<uint64_t, uint64_t> colliding_ids() {
  std::vector<std::pair<uint32_t, uint64_t>> tagged;
  for (uint64_t id = 1; id < 400'000; ++id)
    tagged.emplace_back(block_table::tag_of(id), id);
  std::sort(tagged.begin(), tagged.end());
  for (size_t i = 1; i < tagged.size(); ++i)
    if (tagged[i].first == tagged[i - 1].first)
      return {tagged[i - 1].second, tagged[i].second};
  FAIL("no tag collision among 400k ids");
  return {};
}

} // namespace

TEST_CASE("ids with colliding tags are told apart") {
  auto [a, b] = colliding_ids();
  REQUIRE(block_table::tag_of(a) == block_table::tag_of(b));
  std::vector<uint64_t> ids{a, b};
  auto id_of = [&](uint32_t i) { return ids.at(i); };
  block_table t;
  const auto tag = block_table::tag_of(a);
  CHECK(t.find_or_insert(a, tag, id_of, [] { return 0u; }) == std::pair{0u, true});
  CHECK(t.find_or_insert(b, tag, id_of, [] { return 1u; }) == std::pair{1u, true});
  CHECK(t.find_or_insert(b, tag, id_of, [] { return 7u; }) == std::pair{1u, false});
  CHECK(t.candidate(tag) == 0u); // the first under the tag, not necessarily b
  CHECK(t.find(a, tag, id_of) == 0u);
  CHECK(t.find(b, tag, id_of) == 1u);
  t.erase(tag, 0);
  CHECK(t.find(a, tag, id_of) == block_table::none);
  CHECK(t.find(b, tag, id_of) == 1u);
  CHECK(t.size() == 1);

  // Through the index: a chain whose second block's tag is first claimed by another id.
  prefix_index ix{100};
  holder_ref h{"n", "w", "c"}, g{"m", "w", "c"};
  chain other{std::nullopt, {a}}, mine{std::nullopt, {5, b}};
  ix.store(g, 1, tier::device, {&other, 1});
  ix.store(h, 1, tier::device, {&mine, 1});
  CHECK(ix.match(std::vector<uint64_t>{5, b}).longest == 2);
  CHECK(ix.match(std::vector<uint64_t>{5, a}).longest == 1);
  CHECK(ix.audit().empty());
}

TEST_CASE("erasing keeps every other id reachable through growth and wrap-around") {
  std::mt19937_64 rng{GENERATE(1u, 2u, 3u)};
  std::vector<uint64_t> ids; // by node index
  std::map<uint64_t, uint32_t> present;
  auto id_of = [&](uint32_t i) { return ids.at(i); };
  block_table t;
  for (int step = 0; step < 20000; ++step) {
    // A small id space keeps probe runs long and erasures frequent.
    const uint64_t id = rng() % 3000;
    const auto tag = block_table::tag_of(id);
    if (rng() % 3 == 0 && present.count(id)) {
      t.erase(tag, present[id]);
      present.erase(id);
    } else {
      auto [idx, inserted] = t.find_or_insert(id, tag, id_of, [&] {
        ids.push_back(id);
        return static_cast<uint32_t>(ids.size() - 1);
      });
      CHECK(inserted == !present.count(id));
      present[id] = idx;
    }
    REQUIRE(t.size() == present.size());
    if (step % 97 == 0)
      for (auto& [k, idx] : present)
        REQUIRE(t.find(k, block_table::tag_of(k), id_of) == idx);
  }
}

// prefix_index: the longest-prefix match per holder and per cluster in one query,
// tiers, evictions, epochs (stale reports ignored, newer ones replace), dropping a
// node, ghosts for parents announced late, bounded capacity with LRU eviction of
// leaves, and a randomized comparison with a naive model.

#include <map>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "kv_directory/prefix_index.hpp"

using namespace prfaas::directory;

namespace {

holder_ref holder(const std::string& node, const std::string& cluster,
                  const std::string& actor = "w") {
  return {node, actor, cluster};
}

/// Stores one chain from the first block of a prompt.
apply_outcome put(prefix_index& ix, const holder_ref& h, std::vector<block_id> ids,
                  uint64_t epoch = 1, tier t = tier::device, std::optional<block_id> parent = {}) {
  std::vector<chain> cs{{parent, std::move(ids)}};
  return ix.store(h, epoch, t, cs);
}

uint32_t matched(const match_result& r, const std::string& node) {
  for (auto& n : r.nodes)
    if (n.holder.node == node)
      return n.blocks;
  return 0;
}

const cluster_match* cluster_of(const match_result& r, const std::string& c) {
  for (auto& m : r.clusters)
    if (m.cluster == c)
      return &m;
  return nullptr;
}

} // namespace

TEST_CASE("one query answers per holder and per cluster") {
  prefix_index ix{1000};
  put(ix, holder("a", "pd"), {1, 2, 3, 4});
  put(ix, holder("b", "pd"), {1, 2});
  put(ix, holder("c", "prfaas"), {1, 2, 3});
  put(ix, holder("d", "prfaas"), {1, 2, 3});
  put(ix, holder("e", "prfaas"), {7, 8}); // another prompt
  std::vector<block_id> q{1, 2, 3, 4, 5};
  auto r = ix.match(q);
  REQUIRE(r.nodes.size() == 4);
  CHECK(r.nodes[0].holder.node == "a");
  CHECK(r.nodes[0].blocks == 4);
  CHECK(matched(r, "b") == 2);
  CHECK(matched(r, "c") == 3);
  CHECK(matched(r, "d") == 3);
  CHECK(matched(r, "e") == 0);
  CHECK(r.longest == 4);
  REQUIRE(r.clusters.size() == 2);
  CHECK(r.clusters[0].cluster == "pd"); // longest first
  CHECK(r.clusters[0].blocks == 4);
  REQUIRE(r.clusters[0].best.size() == 1);
  CHECK(r.nodes[r.clusters[0].best[0]].holder.node == "a");
  auto* p = cluster_of(r, "prfaas");
  REQUIRE(p);
  CHECK(p->blocks == 3);
  REQUIRE(p->best.size() == 2); // both c and d hold 3
  std::set<std::string> best;
  for (auto i : p->best)
    best.insert(r.nodes[i].holder.node);
  CHECK(best == std::set<std::string>{"c", "d"});
  auto s = ix.stats();
  CHECK(s.queries == 1);
  CHECK(s.hit_blocks == 4);
}

TEST_CASE("a match is a prefix: a later block without the earlier ones counts nothing") {
  prefix_index ix{1000};
  put(ix, holder("a", "pd"), {1, 2, 3});
  // b holds 2 and 3 as a continuation of 1 but not 1 itself.
  put(ix, holder("b", "pd"), {2, 3}, 1, tier::device, 1);
  std::vector<block_id> q{1, 2, 3};
  auto r = ix.match(q);
  CHECK(matched(r, "a") == 3);
  CHECK(matched(r, "b") == 0);
  std::vector<block_id> diverging{1, 2, 9, 3};
  r = ix.match(diverging);
  CHECK(matched(r, "a") == 2);
  CHECK(r.longest == 2);
  std::vector<block_id> none{42};
  r = ix.match(none);
  CHECK(r.nodes.empty());
  CHECK(r.clusters.empty());
  CHECK(r.longest == 0);
  CHECK(ix.match(std::vector<block_id>{}).longest == 0);
}

TEST_CASE("the slowest tier of a matched prefix is reported") {
  prefix_index ix{1000};
  auto a = holder("a", "pd");
  put(ix, a, {1, 2}, 1, tier::device);
  put(ix, a, {3}, 1, tier::host, 2);
  put(ix, a, {1}, 1, tier::disk); // also on disk: the fastest copy counts
  std::vector<block_id> two{1, 2}, three{1, 2, 3};
  auto r = ix.match(two);
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.nodes[0].slowest == tier::device);
  r = ix.match(three);
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.nodes[0].blocks == 3);
  CHECK(r.nodes[0].slowest == tier::host);
  // Evicting the device copy of block 1 leaves the disk copy.
  std::vector<block_id> one{1};
  ix.evict(a, 1, tier::device, one);
  r = ix.match(three);
  CHECK(r.nodes[0].blocks == 3);
  CHECK(r.nodes[0].slowest == tier::disk);
}

TEST_CASE("evictions shorten matches and free entries nobody holds") {
  prefix_index ix{1000};
  auto a = holder("a", "pd"), b = holder("b", "pd");
  put(ix, a, {1, 2, 3});
  put(ix, b, {1, 2, 3, 4});
  std::vector<block_id> q{1, 2, 3, 4};
  std::vector<block_id> tail{4};
  ix.evict(b, 1, tier::device, tail);
  CHECK(matched(ix.match(q), "b") == 3);
  CHECK_FALSE(ix.contains(4));
  CHECK(ix.size() == 3);
  // An interior block evicted by one holder (a confused report) ends its match there,
  // but the entry stays: b still holds it.
  std::vector<block_id> mid{2};
  ix.evict(a, 1, tier::device, mid);
  auto r = ix.match(q);
  CHECK(matched(r, "a") == 1);
  CHECK(matched(r, "b") == 3);
  // Everything evicted by everyone: the index is empty.
  std::vector<block_id> all{1, 2, 3};
  ix.evict(a, 1, tier::device, all);
  ix.evict(b, 1, tier::device, all);
  CHECK(ix.size() == 0);
  CHECK(ix.stats().references == 0);
}

TEST_CASE("epochs: a stale report is ignored and a newer one replaces the holder's state") {
  prefix_index ix{1000};
  auto a = holder("a", "pd");
  CHECK(put(ix, a, {1, 2, 3}, 5) == apply_outcome::applied);
  CHECK(put(ix, a, {7, 8}, 4) == apply_outcome::stale);
  CHECK_FALSE(ix.contains(7));
  std::vector<block_id> old_evict{1};
  CHECK(ix.evict(a, 4, tier::device, old_evict) == apply_outcome::stale);
  CHECK(ix.stats().stale_reports == 2);
  CHECK(put(ix, a, {7, 8}, 5) == apply_outcome::applied); // same epoch adds
  CHECK(ix.blocks_of("a", "w") == 5);
  // A re-announce at epoch 6 holds only {1, 2}: 3, 7 and 8 are gone.
  CHECK(put(ix, a, {1, 2}, 6) == apply_outcome::replaced);
  CHECK(ix.blocks_of("a", "w") == 2);
  CHECK_FALSE(ix.contains(3));
  CHECK_FALSE(ix.contains(7));
  std::vector<block_id> q{1, 2, 3};
  CHECK(ix.match(q).longest == 2);
}

TEST_CASE("dropping a node forgets its holders and their blocks and their epochs") {
  prefix_index ix{1000};
  put(ix, holder("a", "pd", "w0"), {1, 2, 3}, 9);
  put(ix, holder("a", "pd", "w1"), {1, 5}, 9);
  put(ix, holder("b", "pd"), {1, 2}, 9);
  CHECK(ix.holders_on("a").size() == 2);
  CHECK(ix.drop_node("a") == 5);
  CHECK(ix.holders_on("a").empty());
  std::vector<block_id> q{1, 2, 3};
  auto r = ix.match(q);
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.nodes[0].holder.node == "b");
  CHECK(r.nodes[0].blocks == 2);
  CHECK_FALSE(ix.contains(3));
  CHECK_FALSE(ix.contains(5));
  // A restarted worker starts its epochs over: accepted.
  CHECK(put(ix, holder("a", "pd", "w0"), {1, 2, 3}, 1) == apply_outcome::applied);
  CHECK(matched(ix.match(q), "a") == 3);
  CHECK(ix.drop_node("nobody") == 0);
}

TEST_CASE("a parent announced after its children joins the chain") {
  prefix_index ix{1000};
  auto a = holder("a", "pd");
  put(ix, a, {5, 6}, 1, tier::device, 4); // 4 not announced: a ghost
  CHECK(ix.contains(4));
  std::vector<block_id> q{4, 5, 6};
  CHECK(ix.match(q).longest == 0);
  put(ix, a, {4});
  CHECK(ix.match(q).longest == 3);
  // Evicting the children leaves 4; evicting 4 then empties the index.
  std::vector<block_id> kids{5, 6}, root{4};
  ix.evict(a, 1, tier::device, kids);
  CHECK(ix.size() == 1);
  ix.evict(a, 1, tier::device, root);
  CHECK(ix.size() == 0);
}

TEST_CASE("a ghost nobody announces disappears with its last child") {
  prefix_index ix{1000};
  auto a = holder("a", "pd");
  put(ix, a, {5, 6}, 1, tier::device, 4);
  CHECK(ix.size() == 3);
  std::vector<block_id> kids{6, 5};
  ix.evict(a, 1, tier::device, kids);
  CHECK(ix.size() == 0);
}

TEST_CASE("capacity evicts least recently used leaves and never a parent before its child") {
  prefix_index ix{5};
  auto a = holder("a", "pd");
  put(ix, a, {1, 2, 3});
  put(ix, a, {10, 11, 12}); // 6 entries: the older leaf (3) goes
  CHECK(ix.size() == 5);
  CHECK(ix.stats().evictions == 1);
  CHECK_FALSE(ix.contains(3));
  CHECK(ix.contains(2));
  std::vector<block_id> q{1, 2, 3};
  CHECK(ix.match(q).longest == 2); // and touches 1 and 2
  put(ix, a, {20});                // the least recently used leaf is now 12
  CHECK(ix.size() == 5);
  CHECK_FALSE(ix.contains(12));
  CHECK(ix.contains(11));
  CHECK(ix.contains(2));
  CHECK(ix.contains(20));
  CHECK(ix.blocks_of("a", "w") == 5);
}

TEST_CASE("a match marks its blocks used in chain order wherever they lie on the recency list") {
  prefix_index ix{6};
  auto a = holder("a", "pd");
  put(ix, a, {1, 2, 3, 4});
  put(ix, a, {10});
  put(ix, a, {1, 2, 50}); // recency, least first: 3 4 10 1 2 50
  std::vector<block_id> q{1, 2, 3, 4};
  CHECK(ix.match(q).longest == 4); // now 10 50 1 2 3 4
  put(ix, a, {60});
  CHECK_FALSE(ix.contains(10));
  CHECK(ix.contains(4));
  put(ix, a, {70});
  CHECK_FALSE(ix.contains(50));
  CHECK(ix.contains(4));
  put(ix, a, {80}); // 1, 2 and 3 have children: parked; 4 goes, 3 rejoins as least recent
  CHECK_FALSE(ix.contains(4));
  std::vector<block_id> q3{1, 2, 3};
  CHECK(ix.match(q3).longest == 3); // parked 1 and 2 rejoin, then 3: 60 70 80 1 2 3
  put(ix, a, {90});
  CHECK_FALSE(ix.contains(60));
  CHECK(ix.contains(3));
  CHECK(ix.contains(70));
  CHECK(ix.audit().empty());
}

TEST_CASE("a chain longer than the capacity keeps its head") {
  prefix_index ix{3};
  put(ix, holder("a", "pd"), {1, 2, 3, 4, 5, 6});
  CHECK(ix.size() == 3);
  CHECK(ix.stats().evictions == 3);
  std::vector<block_id> q{1, 2, 3, 4, 5, 6};
  CHECK(ix.match(q).longest == 3);
}

TEST_CASE("random reports: matches agree with a naive model and never exceed it when bounded") {
  // Naive model: holder → tier → set of blocks; a holder matches the longest prefix
  // whose every block it holds in some tier.
  std::mt19937_64 rng{GENERATE(1u, 2u, 3u, 4u)};
  const size_t capacity = GENERATE(size_t{1} << 20, size_t{40});
  const bool bounded = capacity < 1000;
  prefix_index ix{capacity};
  std::map<std::string, std::map<int, std::set<block_id>>> model;
  std::map<std::string, uint64_t> epochs;
  const std::vector<std::string> nodes{"n0", "n1", "n2", "n3"};
  // A small forest of prompts: prompt p's block i has id p * 100 + i.
  auto prompt = [](int p, int len) {
    std::vector<block_id> ids;
    for (int i = 0; i < len; ++i)
      ids.push_back(static_cast<block_id>(p * 100 + i + 1));
    return ids;
  };
  for (int step = 0; step < 3000; ++step) {
    auto& node = nodes[rng() % nodes.size()];
    auto h = holder(node, node < "n2" ? "pd" : "prfaas");
    auto t = static_cast<tier>(rng() % 3);
    int p = static_cast<int>(rng() % 6);
    auto ids = prompt(p, 1 + static_cast<int>(rng() % 8));
    switch (rng() % 10) {
    case 0: // re-announce at a new epoch with one prompt
      epochs[node] += 1;
      model[node].clear();
      put(ix, h, ids, epochs[node], t);
      model[node][static_cast<int>(t)].insert(ids.begin(), ids.end());
      break;
    case 1: // node down
      if (rng() % 3 == 0) {
        ix.drop_node(node);
        model.erase(node);
        epochs.erase(node);
      }
      break;
    case 2:
    case 3: { // evict a tail
      size_t keep = rng() % ids.size();
      std::vector<block_id> gone(ids.begin() + static_cast<long>(keep), ids.end());
      ix.evict(h, epochs[node], t, gone);
      for (auto id : gone)
        model[node][static_cast<int>(t)].erase(id);
      break;
    }
    default: // store a prefix
      put(ix, h, ids, epochs[node], t);
      model[node][static_cast<int>(t)].insert(ids.begin(), ids.end());
    }
    REQUIRE(ix.size() <= capacity);
    if (step % 7 != 0)
      continue;
    auto q = prompt(static_cast<int>(rng() % 6), 8);
    auto r = ix.match(q);
    for (auto& n : nodes) {
      uint32_t expect = 0;
      auto it = model.find(n);
      if (it != model.end())
        while (expect < q.size()) {
          bool held = false;
          for (auto& [_, s] : it->second)
            held = held || s.count(q[expect]);
          if (!held)
            break;
          ++expect;
        }
      INFO("step " << step << " node " << n);
      if (bounded)
        CHECK(matched(r, n) <= expect);
      else
        CHECK(matched(r, n) == expect);
    }
  }
}

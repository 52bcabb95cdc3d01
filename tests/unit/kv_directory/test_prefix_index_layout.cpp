// prefix_index::match finds a chain's entries two ways: by *following* (the entry after
// block k-1's is tried for block k, which holds where a chain was stored in one go) and
// by *staging* table lookups (where entries lie anywhere). These tests lay chains out
// so that a walk takes each way and switches between them, several times in one
// query, and compare every answer with a plain model of who stored what.

#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "kv_directory/prefix_index.hpp"

using namespace prfaas::directory;

namespace {

holder_ref holder(const std::string& node) {
  return {node, "w", "pd"};
}

/// Who stored which blocks (no capacity, no evictions): the longest prefix per holder.
struct plain_model {
  std::map<block_id, std::set<std::string>> held;

  void add(const std::string& node, const std::vector<block_id>& ids) {
    for (auto id : ids)
      held[id].insert(node);
  }

  std::map<std::string, uint32_t> match(const std::vector<block_id>& q) const {
    std::map<std::string, uint32_t> out;
    std::set<std::string> alive;
    if (auto i = held.find(q.front()); i != held.end())
      alive = i->second;
    for (uint32_t k = 0; k < q.size() && !alive.empty(); ++k) {
      auto i = held.find(q[k]);
      for (auto it = alive.begin(); it != alive.end();) {
        if (i == held.end() || !i->second.count(*it)) {
          out[*it] = k;
          it = alive.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& h : alive)
      out[h] = static_cast<uint32_t>(q.size());
    std::erase_if(out, [](auto& e) { return e.second == 0; });
    return out;
  }
};

std::map<std::string, uint32_t> answer(const match_result& r) {
  std::map<std::string, uint32_t> out;
  for (auto& n : r.nodes)
    out[n.holder.node] = n.blocks;
  return out;
}

/// Stores `ids` for `node` as one chain after `parent` (none: from the first block).
void put(prefix_index& ix, plain_model& m, const std::string& node,
         const std::vector<block_id>& ids, std::optional<block_id> parent = {}) {
  std::vector<chain> cs{{parent, ids}};
  ix.store(holder(node), 1, tier::device, cs);
  m.add(node, ids);
}

std::vector<block_id> run(block_id first, size_t n) {
  std::vector<block_id> ids(n);
  for (size_t k = 0; k < n; ++k)
    ids[k] = first + k;
  return ids;
}

} // namespace

TEST_CASE("a match finds every block however the chain's entries lie") {
  prefix_index ix{1u << 20};
  plain_model m;
  std::vector<std::vector<block_id>> queries;

  // "a": 300 blocks stored at once, so its entries lie one after another.
  auto a = run(1'000'000, 300);
  put(ix, m, "a", a);
  queries.push_back(a);

  // "b": four chains stored a block at a time, round robin: entries four apart.
  std::vector<std::vector<block_id>> bs;
  for (block_id c = 0; c < 4; ++c)
    bs.push_back(run(2'000'000 + c * 1000, 120));
  for (size_t k = 0; k < 120; ++k)
    for (auto& b : bs)
      put(ix, m, "b", {b[k]}, k ? std::optional<block_id>{b[k - 1]} : std::nullopt);
  queries.insert(queries.end(), bs.begin(), bs.end());

  // "c": stretches of 20 in order, each followed by 3 blocks stored between another
  // holder's: breaks close together, then enough in order to follow again.
  std::vector<block_id> c;
  block_id other = 3'500'000;
  for (block_id s = 0; s < 10; ++s) {
    auto stretch = run(3'000'000 + s * 100, 20);
    put(ix, m, "c", stretch, c.empty() ? std::nullopt : std::optional<block_id>{c.back()});
    c.insert(c.end(), stretch.begin(), stretch.end());
    for (block_id k = 0; k < 3; ++k) {
      put(ix, m, "x", {other++});
      put(ix, m, "c", {3'000'000 + s * 100 + 50 + k}, c.back());
      c.push_back(3'000'000 + s * 100 + 50 + k);
    }
  }
  queries.push_back(c);

  // "d": one break in the middle (a lone miss: looked up, then followed on).
  auto d1 = run(4'000'000, 50), d2 = run(4'000'100, 50);
  put(ix, m, "d", d1);
  put(ix, m, "x", run(4'500'000, 7));
  put(ix, m, "d", d2, d1.back());
  auto d = d1;
  d.insert(d.end(), d2.begin(), d2.end());
  queries.push_back(d);

  // Shared prefixes: "e" holds the start of "a" and goes on elsewhere.
  auto e = std::vector<block_id>(a.begin(), a.begin() + 100);
  auto e_tail = run(5'000'000, 60);
  put(ix, m, "e", e);
  put(ix, m, "e", e_tail, e.back());
  e.insert(e.end(), e_tail.begin(), e_tail.end());
  queries.push_back(e);

  // Prefixes, an unknown block in the middle, and a query naming blocks twice.
  queries.push_back({a.begin(), a.begin() + 37});
  auto hole = c;
  hole[150] = 9'999'999;
  queries.push_back(hole);
  auto twice = std::vector<block_id>(a.begin(), a.begin() + 60);
  twice.insert(twice.end(), a.begin() + 10, a.begin() + 90);
  queries.push_back(twice);

  for (size_t q = 0; q < queries.size(); ++q) {
    INFO("query " << q << " of " << queries[q].size() << " blocks");
    CHECK(answer(ix.match(queries[q])) == m.match(queries[q]));
    REQUIRE(ix.audit().empty());
  }
  CHECK(answer(ix.match(a))["a"] == 300);
  CHECK(answer(ix.match(c))["c"] == c.size());
  CHECK(answer(ix.match(hole))["c"] == 150);
  CHECK(answer(ix.match(twice))["a"] == twice.size());
}

TEST_CASE("following never takes a freed entry for a block, even one with id 0") {
  prefix_index ix{1u << 10};
  plain_model m;
  put(ix, m, "a", {10, 11, 12});
  put(ix, m, "b", {0});
  // The entry after 11's is freed: a free entry reads as id 0.
  ix.evict(holder("a"), 1, tier::device, std::vector<block_id>{12});
  m.held[12].erase("a");
  REQUIRE_FALSE(ix.contains(12));

  std::vector<block_id> q{10, 11, 0};
  auto r = answer(ix.match(q));
  CHECK(r == std::map<std::string, uint32_t>{{"a", 2}});
  CHECK(ix.match(std::vector<block_id>{0}).longest == 1);
  REQUIRE(ix.audit().empty());

  // The freed entry is handed out again, to a chain whose run then breaks.
  put(ix, m, "c", {20, 21, 22});
  for (auto& query : std::vector<std::vector<block_id>>{{20, 21, 22}, {10, 11, 12}, {10, 11}}) {
    CHECK(answer(ix.match(query)) == m.match(query));
    REQUIRE(ix.audit().empty());
  }
}

TEST_CASE("a match ends with more holders alive than an entry keeps inline") {
  // Ten holders of the same blocks: block 0's refs spill, and a query may end before
  // any holder drops out.
  prefix_index ix{1u << 10};
  plain_model m;
  for (int h = 0; h < 10; ++h) {
    put(ix, m, "n" + std::to_string(h), {1, 2, 3});
    if (h < 3)
      put(ix, m, "n" + std::to_string(h), {4}, 3);
  }
  for (auto& q :
       std::vector<std::vector<block_id>>{{1}, {1, 2}, {1, 2, 3}, {1, 2, 3, 4}, {1, 2, 3, 4, 5}}) {
    INFO("query of " << q.size() << " blocks");
    auto r = ix.match(q);
    CHECK(answer(r) == m.match(q));
    CHECK(r.nodes.size() == 10);
    REQUIRE(ix.audit().empty());
  }
}

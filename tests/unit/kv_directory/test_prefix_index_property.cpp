// prefix_index under bad input: random interleavings of stores, evictions and node
// drops, with unknown nodes, stale and newer epochs, duplicated reports, children
// before their parents, evictions before stores, conflicting and cyclic parents. After
// every step the index must pass its own audit() (links, counts, no orphan ghosts,
// recency list, size <= capacity) and, unbounded, agree with a plain std::map model
// on every match, entry, reference and holder; bounded, match no more than the model.
// Seeded: a failure prints its seed, step and the operation.

#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include "kv_directory/prefix_index.hpp"

using namespace prfaas::directory;

namespace {

uint8_t bit(tier t) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(t));
}

std::string key(const holder_ref& h) {
  return h.node + "/" + h.actor;
}

/// The index's rules written the obvious way: maps, recomputed children, collection
/// to a fixpoint. No capacity.
struct model {
  struct entry {
    std::optional<block_id> parent;
    std::map<std::string, uint8_t> holders; ///< holder key → tier mask
  };
  struct holder {
    holder_ref ref;
    uint64_t epoch = 0;
  };
  std::map<block_id, entry> entries;
  std::map<std::string, holder> holders;
  uint64_t stale = 0;

  size_t children(block_id id) const {
    size_t n = 0;
    for (auto& [_, e] : entries)
      n += e.parent == id;
    return n;
  }

  holder& holder_for(const holder_ref& h) {
    auto [it, fresh] = holders.try_emplace(key(h));
    if (fresh)
      it->second.ref = h;
    else if (!h.cluster.empty())
      it->second.ref.cluster = h.cluster;
    return it->second;
  }

  /// Drops holderless leaves until none is left.
  void collect() {
    for (bool again = true; again;) {
      again = false;
      for (auto it = entries.begin(); it != entries.end();) {
        if (it->second.holders.empty() && children(it->first) == 0) {
          it = entries.erase(it);
          again = true;
        } else {
          ++it;
        }
      }
    }
  }

  size_t forget(const std::string& k) {
    size_t n = 0;
    for (auto& [_, e] : entries)
      n += e.holders.erase(k);
    collect();
    return n;
  }

  apply_outcome admit(const holder_ref& h, uint64_t epoch) {
    auto& x = holder_for(h);
    if (epoch < x.epoch) {
      ++stale;
      return apply_outcome::stale;
    }
    if (epoch == x.epoch)
      return apply_outcome::applied;
    x.epoch = epoch;
    return forget(key(h)) ? apply_outcome::replaced : apply_outcome::applied;
  }

  void ensure(block_id id, std::optional<block_id> parent) {
    auto& e = entries[id];
    if (e.parent || !parent || *parent == id)
      return;
    if (children(id) > 0) // refuse a parent that descends from id
      for (std::optional<block_id> up = parent; up && entries.count(*up); up = entries[*up].parent)
        if (*up == id)
          return;
    e.parent = parent;
    ensure(*parent, std::nullopt);
  }

  apply_outcome store(const holder_ref& h, uint64_t epoch, tier t, const chain& c) {
    auto out = admit(h, epoch);
    if (out == apply_outcome::stale)
      return out;
    auto prev = c.parent;
    for (auto id : c.ids) {
      ensure(id, prev);
      entries[id].holders[key(h)] |= bit(t);
      prev = id;
    }
    return out;
  }

  apply_outcome evict(const holder_ref& h, uint64_t epoch, tier t,
                      const std::vector<block_id>& ids) {
    auto out = admit(h, epoch);
    if (out == apply_outcome::stale)
      return out;
    for (auto id : ids) {
      auto e = entries.find(id);
      if (e == entries.end())
        continue;
      auto m = e->second.holders.find(key(h));
      if (m != e->second.holders.end() && !(m->second &= static_cast<uint8_t>(~bit(t))))
        e->second.holders.erase(m);
    }
    collect();
    return out;
  }

  size_t drop_node(const std::string& node) {
    size_t n = 0;
    for (auto it = holders.begin(); it != holders.end();)
      if (it->second.ref.node == node) {
        n += forget(it->first);
        it = holders.erase(it);
      } else {
        ++it;
      }
    return n;
  }

  /// (blocks, slowest tier) per holder key, for holders matching at least one block.
  std::map<std::string, std::pair<uint32_t, tier>> match(const std::vector<block_id>& q) const {
    std::map<std::string, std::pair<uint32_t, tier>> out;
    for (auto& [k, h] : holders) {
      uint32_t n = 0;
      uint8_t slowest = 0;
      for (; n < q.size(); ++n) {
        auto e = entries.find(q[n]);
        if (e == entries.end() || !e->second.holders.count(k))
          break;
        uint8_t mask = e->second.holders.at(k), fastest = 0;
        while (!(mask & (1u << fastest)))
          ++fastest;
        slowest = std::max(slowest, fastest);
      }
      if (n > 0)
        out[k] = {n, static_cast<tier>(slowest)};
    }
    return out;
  }

  size_t references() const {
    size_t n = 0;
    for (auto& [_, e] : entries)
      n += e.holders.size();
    return n;
  }
};

/// Ids form a fixed binary tree (parent of id is id / 2, root 1), so chains are
/// paths down it; bad reports break that on purpose.
constexpr block_id universe = 127;

struct generator {
  std::mt19937_64 rng;
  const std::vector<std::string> nodes{"n0", "n1", "n2", "n3", "n4"};
  std::map<std::string, uint64_t> epoch; ///< what each holder believes its epoch is

  size_t pick(size_t n) { return static_cast<size_t>(rng() % n); }
  bool chance(int percent) { return static_cast<int>(rng() % 100) < percent; }

  holder_ref holder() {
    std::string node = chance(8) ? "unknown" + std::to_string(pick(3)) : nodes[pick(nodes.size())];
    std::string cluster = node == "n0" || node == "n1" ? "pd" : node == "n4" ? "" : "prfaas";
    if (chance(10))
      cluster = ""; // leaves the cluster the index knows
    return {node, "w" + std::to_string(pick(2)), cluster};
  }

  /// The epoch a report carries: usually current, sometimes stale or newer.
  uint64_t epoch_for(const holder_ref& h) {
    auto& e = epoch[key(h)];
    if (chance(5))
      return ++e; // a re-announce: replaces the holder's state
    if (chance(8) && e > 0)
      return e - 1 - pick(e); // stale
    return e;
  }

  std::vector<block_id> path_down(block_id from, size_t len) {
    std::vector<block_id> ids;
    for (auto id = from; ids.size() < len && id <= universe; id = 2 * id + pick(2))
      ids.push_back(id);
    return ids;
  }

  chain some_chain() {
    chain c;
    auto from = static_cast<block_id>(1 + pick(universe));
    c.ids = path_down(from, 1 + pick(5));
    if (from > 1 && !chance(15))
      c.parent = from / 2; // else a parent left out: it may be learned later
    if (chance(5))
      c.parent = 1 + pick(universe); // a conflicting (maybe cyclic) parent
    if (chance(3))
      c.parent = c.ids.front(); // its own parent
    if (chance(4))
      c.ids.push_back(c.ids.front()); // a chain that loops back
    return c;
  }

  std::vector<block_id> some_ids() {
    if (chance(30)) { // anything, in any order, maybe never stored
      std::vector<block_id> ids(1 + pick(6));
      for (auto& id : ids)
        id = 1 + pick(universe + 20);
      return ids;
    }
    auto ids = path_down(static_cast<block_id>(1 + pick(universe)), 1 + pick(6));
    if (chance(50))
      std::shuffle(ids.begin(), ids.end(), rng); // parent before child, or not
    return ids;
  }

  std::vector<block_id> query() {
    auto q = path_down(1, 1 + pick(8));
    if (chance(10))
      q[pick(q.size())] = 1 + pick(universe + 20);
    return q;
  }
};

std::string describe(const chain& c) {
  std::ostringstream s;
  s << "parent=" << (c.parent ? std::to_string(*c.parent) : "-") << " ids=";
  for (auto id : c.ids)
    s << id << ",";
  return s.str();
}

std::string describe(const std::vector<block_id>& ids) {
  return describe(chain{std::nullopt, ids});
}

/// Compares one query's answer with the model (exactly, or as an upper bound).
void check_match(prefix_index& ix, const model& m, const std::vector<block_id>& q, bool exact) {
  auto r = ix.match(q);
  auto want = m.match(q);
  INFO("query " << describe(q));
  std::map<std::string, std::pair<uint32_t, tier>> got;
  for (auto& n : r.nodes)
    got[key(n.holder)] = {n.blocks, n.slowest};
  if (exact) {
    CHECK(got == want);
  } else {
    for (auto& [k, g] : got)
      CHECK(g.first <= (want.count(k) ? want.at(k).first : 0));
  }
  // Clusters: the best holders of each reach its longest match; longest overall.
  uint32_t longest = 0;
  for (auto& c : r.clusters) {
    REQUIRE(!c.best.empty());
    for (auto i : c.best) {
      CHECK(r.nodes.at(i).holder.cluster == c.cluster);
      CHECK(r.nodes.at(i).blocks == c.blocks);
    }
    for (auto& n : r.nodes)
      if (n.holder.cluster == c.cluster)
        CHECK(n.blocks <= c.blocks);
    longest = std::max(longest, c.blocks);
  }
  CHECK(r.longest == longest);
}

void check_state(prefix_index& ix, const model& m, bool exact) {
  auto problem = ix.audit();
  INFO("audit: " << problem);
  REQUIRE(problem.empty());
  REQUIRE(ix.size() <= ix.capacity());
  auto s = ix.stats();
  CHECK(s.stale_reports == m.stale);
  CHECK(s.holders == m.holders.size());
  if (exact) {
    CHECK(s.references == m.references());
    CHECK(ix.size() == m.entries.size());
    for (block_id id = 1; id <= universe + 20; ++id) {
      INFO("block " << id);
      CHECK(ix.contains(id) == (m.entries.count(id) != 0));
    }
  } else {
    CHECK(s.references <= m.references());
  }
  for (auto& [k, h] : m.holders) {
    size_t held = 0;
    for (auto& [_, e] : m.entries)
      held += e.holders.count(k);
    INFO("holder " << k);
    if (exact)
      CHECK(ix.blocks_of(h.ref.node, h.ref.actor) == held);
    else
      CHECK(ix.blocks_of(h.ref.node, h.ref.actor) <= held);
  }
}

} // namespace

// Sixteen seeds in the normal build; four under ASan, where the 48 runs took a minute.
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t property_seeds = 4;
#else
constexpr uint64_t property_seeds = 16;
#endif

TEST_CASE("bad input leaves the index consistent and equal to a plain model") {
  const uint64_t seed = GENERATE(range(uint64_t{1}, property_seeds + 1));
  const size_t capacity = GENERATE(size_t{1} << 20, size_t{24}, size_t{3});
  const bool exact = capacity > 1000;
  INFO("seed " << seed << " capacity " << capacity);
  generator g{std::mt19937_64{seed}};
  prefix_index ix{capacity};
  model m;
  std::function<void()> last = [] {};
  for (int step = 0; step < 1500; ++step) {
    std::ostringstream what;
    std::function<void()> op;
    const auto roll = g.pick(100);
    if (roll < 10) {
      op = last; // a duplicated report
      what << "repeat of the previous operation";
    } else if (roll < 55) {
      auto h = g.holder();
      auto e = g.epoch_for(h);
      auto t = static_cast<tier>(g.pick(tier_count));
      auto c = g.some_chain();
      what << "store " << key(h) << " epoch " << e << " tier " << int(t) << " " << describe(c);
      op = [&ix, &m, exact, h, e, t, c] {
        auto got = ix.store(h, e, t, {&c, 1});
        auto want = m.store(h, e, t, c);
        if (exact || want == apply_outcome::stale)
          CHECK(got == want);
      };
    } else if (roll < 92) {
      auto h = g.holder();
      auto e = g.epoch_for(h);
      auto t = static_cast<tier>(g.pick(tier_count));
      auto ids = g.some_ids();
      what << "evict " << key(h) << " epoch " << e << " tier " << int(t) << " " << describe(ids);
      op = [&ix, &m, exact, h, e, t, ids] {
        auto got = ix.evict(h, e, t, ids);
        auto want = m.evict(h, e, t, ids);
        if (exact || want == apply_outcome::stale)
          CHECK(got == want);
      };
    } else {
      auto node = g.chance(20) ? std::string{"nobody"} : g.holder().node;
      what << "drop_node " << node;
      op = [&ix, &m, &g, exact, node] {
        auto got = ix.drop_node(node);
        auto want = m.drop_node(node);
        for (auto it = g.epoch.begin(); it != g.epoch.end();) // a restart: epochs start over
          it = it->first.rfind(node + "/", 0) == 0 ? g.epoch.erase(it) : std::next(it);
        if (exact)
          CHECK(got == want);
        else
          CHECK(got <= want);
      };
    }
    INFO("step " << step << ": " << what.str());
    op();
    last = op;
    check_state(ix, m, exact);
    check_match(ix, m, g.query(), exact);
  }
}

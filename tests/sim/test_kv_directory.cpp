// The KV directory in virtual time: answers from the workers' announcements, a
// restart that reports `rebuilding` until the workers re-announced (or the window
// passed) and then answers as before, a node's entries dropped when it goes down and
// asked for again when it comes back.

#include <catch2/catch.hpp>

#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/directory.pb.h"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;
namespace dir = prfaas::directory;

namespace {

/// Stands in for a worker's pool: holds chains, answers Reannounce with all of them
/// at a new epoch (or, `mute`, never answers).
struct pool_state {
  static inline const char* name = "fake_pool";
  std::vector<std::vector<uint64_t>> chains;
  uint64_t epoch = 1;
  uint64_t reannounces = 0;
  std::vector<caf::response_promise> held;
};

caf::behavior fake_pool(caf::stateful_actor<pool_state>* self, prfaas::node_context* ctx,
                        std::string name, bool mute) {
  return {[=](prfaas::remote_message& m) -> caf::result<prfaas::remote_message> {
    dir::Reannounce r;
    if (!prfaas::parse_remote(m, r))
      return prfaas::unknown_type(*ctx, m);
    auto& s = self->state;
    ++s.reannounces;
    if (mute) {
      s.held.push_back(self->make_response_promise());
      return caf::delegated<prfaas::remote_message>{};
    }
    ++s.epoch;
    dir::BlocksStored out;
    out.set_node(ctx->node());
    out.set_actor(name);
    out.set_cluster(ctx->cluster());
    out.set_epoch(s.epoch);
    for (auto& c : s.chains)
      out.add_chains()->mutable_block_ids()->Add(c.begin(), c.end());
    return prfaas::make_reply(m, out);
  }};
}

prfaas::actor_registry test_registry() {
  auto r = prfaas::actor_registry::with_builtins();
  r.add({"fake_pool",
         "a worker's pool, for the directory",
         {{"mute", prfaas::param_kind::boolean, "false", ""}},
         [](prfaas::node_context& ctx, const std::string& name, const prfaas::actor_params& p) {
           return ctx.system().spawn(fake_pool, &ctx, name, p.boolean("mute"));
         }});
  return r;
}

std::string yaml_for(bool mute_p1 = false) {
  return std::string{R"(
deployment: kvdir
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
transport: { retry_interval: 100ms, request_timeout: 2s }
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
nodes:
  - name: p0
    cluster: prfaas
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: fake_pool, name: w }
  - name: p1
    cluster: prfaas
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: fake_pool, name: w, mute: )"} +
         (mute_p1 ? "true" : "false") + R"( }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7102"
    data: "tcp://127.0.0.1:7202"
    actors:
      - { type: fake_pool, name: w }
      - { type: kv_directory, name: dir, holders: fake_pool, rebuild_window: 3s, capacity: 10000 }
)";
}

pool_state& pool(sim_fixture& f, const std::string& node) {
  return prfaas::test::state_of<pool_state>(f.at(node).context().msgr().lookup("w"));
}

/// The worker on `node` stores a chain and tells the directory (one-way).
void announce(sim_fixture& f, const std::string& node, std::vector<uint64_t> chain) {
  auto& p = pool(f, node);
  p.chains.push_back(chain);
  dir::BlocksStored m;
  m.set_node(node);
  m.set_actor("w");
  m.set_epoch(p.epoch); // cluster left out: the directory takes it from the deployment
  m.add_chains()->mutable_block_ids()->Add(chain.begin(), chain.end());
  auto& ctx = f.at(node).context();
  prfaas::send_remote(ctx, prfaas::make_remote(ctx.local("w"), {"d0", "dir"}, m));
}

void evict(sim_fixture& f, const std::string& node, std::vector<uint64_t> ids) {
  auto& p = pool(f, node);
  for (auto& c : p.chains)
    c.erase(std::remove_if(c.begin(), c.end(),
                           [&](uint64_t id) { return std::count(ids.begin(), ids.end(), id) > 0; }),
            c.end());
  dir::BlocksEvicted m;
  m.set_node(node);
  m.set_actor("w");
  m.set_epoch(p.epoch);
  m.mutable_block_ids()->Add(ids.begin(), ids.end());
  auto& ctx = f.at(node).context();
  prfaas::send_remote(ctx, prfaas::make_remote(ctx.local("w"), {"d0", "dir"}, m));
}

dir::PrefixMatch query(sim_fixture& f, const std::string& from, std::vector<uint64_t> ids) {
  dir::PrefixQuery q;
  q.mutable_block_ids()->Add(ids.begin(), ids.end());
  auto out = f.request(from, prfaas::make_remote({from, "client"}, {"d0", "dir"}, q), 1s);
  f.advance(10ms);
  REQUIRE(out->done);
  REQUIRE(out->reply);
  dir::PrefixMatch m;
  REQUIRE(prfaas::parse_remote(*out->reply, m));
  return m;
}

uint32_t node_blocks(const dir::PrefixMatch& m, const std::string& node) {
  for (auto& n : m.nodes())
    if (n.node() == node)
      return n.matched_blocks();
  return 0;
}

uint32_t cluster_blocks(const dir::PrefixMatch& m, const std::string& cluster) {
  for (auto& c : m.clusters())
    if (c.cluster() == cluster)
      return c.matched_blocks();
  return 0;
}

std::vector<std::string> best_of(const dir::PrefixMatch& m, const std::string& cluster) {
  std::vector<std::string> out;
  for (auto& c : m.clusters())
    if (c.cluster() == cluster)
      for (auto i : c.best())
        out.push_back(m.nodes(static_cast<int>(i)).node());
  return out;
}

/// Three nodes up, the directory rebuilt (every pool answered, holding nothing),
/// then the announcements of the tests.
struct announced : sim_fixture {
  explicit announced(bool mute_p1 = false) : sim_fixture(yaml_for(mute_p1), test_registry()) {
    start("p0");
    start("p1");
    start("d0");
    directory_started = now();
    advance(300ms);
    announce(*this, "p0", {1, 2, 3, 4});
    announce(*this, "p1", {1, 2});
    announce(*this, "d0", {1, 2, 3});
    advance(10ms);
  }
  clock_type::time_point directory_started;
};

const std::vector<uint64_t> prompt{1, 2, 3, 4, 5};

void check_full_answer(const dir::PrefixMatch& m) {
  CHECK_FALSE(m.rebuilding());
  CHECK(m.longest_blocks() == 4);
  CHECK(cluster_blocks(m, "prfaas") == 4);
  CHECK(best_of(m, "prfaas") == std::vector<std::string>{"p0"});
  CHECK(cluster_blocks(m, "pd") == 3);
  CHECK(best_of(m, "pd") == std::vector<std::string>{"d0"});
  CHECK(node_blocks(m, "p0") == 4);
  CHECK(node_blocks(m, "p1") == 2);
  CHECK(node_blocks(m, "d0") == 3);
}

} // namespace

TEST_CASE("the directory answers prefix queries from the workers' announcements") {
  announced f;
  auto m = query(f, "d0", prompt);
  check_full_answer(m);
  REQUIRE(m.nodes_size() == 3);
  CHECK(m.nodes(0).node() == "p0"); // longest first
  CHECK(m.nodes(0).cluster() == "prfaas");
  CHECK(m.nodes(0).actor() == "w");
  // From another node, across the network: the same answer.
  check_full_answer(query(f, "p1", prompt));
  // p0 evicts its tail block: the PrfaaS cluster's best is now 3 blocks.
  evict(f, "p0", {4});
  f.advance(10ms);
  m = query(f, "d0", prompt);
  CHECK(cluster_blocks(m, "prfaas") == 3);
  CHECK(node_blocks(m, "p0") == 3);
  CHECK(m.longest_blocks() == 3);
  // An unrelated prompt matches nothing.
  m = query(f, "d0", {77, 78});
  CHECK(m.nodes_size() == 0);
  CHECK(m.longest_blocks() == 0);
  auto metrics = f.at("d0").node_metrics();
  CHECK(metrics->counter_value("prfaas_kv_directory_queries_total", {{"directory", "dir"}}) == 4);
  CHECK(metrics->counter_value("prfaas_kv_directory_hit_blocks_total", {{"directory", "dir"}}) ==
        4 + 4 + 3 + 0);
}

TEST_CASE("a restarted directory says rebuilding until the workers re-announce and then answers as "
          "before") {
  announced f;
  check_full_answer(query(f, "d0", prompt));
  // The PrfaaS nodes' answers cannot reach the directory for a while (shorter than the
  // failure detector's bound: they stay up).
  f.net().block("p0", "d0");
  f.net().block("p1", "d0");
  auto old = f.at("d0").context().msgr().lookup("dir");
  caf::anon_send_exit(old, caf::exit_reason::kill);
  f.advance(5ms); // the supervisor restarts it; it asks every pool
  REQUIRE(f.at("d0").context().msgr().lookup("dir") != old);
  auto m = query(f, "d0", prompt);
  CHECK(m.rebuilding());
  CHECK(node_blocks(m, "d0") == 3); // the local pool already answered
  CHECK(node_blocks(m, "p0") == 0);
  CHECK(f.at("d0").node_metrics()->counter_value("prfaas_kv_directory_queries_total",
                                                 {{"directory", "dir"}}) >= 1);
  f.advance(200ms);
  CHECK(query(f, "d0", prompt).rebuilding());
  f.net().unblock("p0", "d0");
  f.net().unblock("p1", "d0");
  f.advance(300ms); // the re-sent requests get their answers
  check_full_answer(query(f, "d0", prompt));
  CHECK(pool(f, "p0").reannounces == 2); // once at the first start, once after the restart
  CHECK(pool(f, "p1").reannounces == 2);
}

TEST_CASE("a worker that never answers keeps the directory rebuilding for rebuild_window only") {
  announced f{true}; // p1's pool never answers a Reannounce; the window is 3 s
  // Announcements still count while it rebuilds: the answer is complete, but flagged.
  auto m = query(f, "d0", prompt);
  CHECK(m.rebuilding());
  CHECK(m.longest_blocks() == 4);
  f.advance(f.directory_started + 2900ms - f.now());
  CHECK(query(f, "d0", prompt).rebuilding());
  f.advance(f.directory_started + 3100ms - f.now());
  check_full_answer(query(f, "d0", prompt));
  CHECK(pool(f, "p1").reannounces == 1);
}

TEST_CASE("a node that goes down loses its entries and is asked again when it is back") {
  announced f;
  f.net().isolate("p0");
  f.advance(1s); // down after 5 missed 100 ms heartbeats
  auto m = query(f, "d0", prompt);
  CHECK_FALSE(m.rebuilding());
  CHECK(node_blocks(m, "p0") == 0);
  CHECK(cluster_blocks(m, "prfaas") == 2);
  CHECK(best_of(m, "prfaas") == std::vector<std::string>{"p1"});
  CHECK(cluster_blocks(m, "pd") == 3);
  CHECK(f.at("d0").node_metrics()->counter_value("prfaas_kv_directory_dropped_blocks_total",
                                                 {{"directory", "dir"}}) == 4);
  // Back: the directory asks p0's pool again, which still holds its blocks.
  f.net().rejoin("p0");
  f.advance(1s);
  check_full_answer(query(f, "d0", prompt));
  CHECK(pool(f, "p0").reannounces == 2);
}

TEST_CASE("a crashed node's entries are gone") {
  announced f;
  f.crash("p1");
  f.advance(1s);
  auto m = query(f, "d0", prompt);
  CHECK(node_blocks(m, "p1") == 0);
  CHECK(node_blocks(m, "p0") == 4);
  CHECK(m.nodes_size() == 2);
}

TEST_CASE("a real prefill worker's epochs come from the virtual clock and rise across a restart at "
          "the same instant") {
  // The directory replaces a worker's entries when its epoch rises: a worker restarted
  // by its supervisor, which in virtual time happens at the instant of the crash, must
  // still report a higher epoch than its previous life.
  sim_fixture f{R"(
deployment: epochs
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
transport: { retry_interval: 100ms, request_timeout: 2s }
model: { engine: reference, block_tokens: 16 }
nodes:
  - name: p0
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: prefill_worker, name: pf, cache_blocks: 8 }
)"};
  f.start("p0");
  f.advance(2s);
  auto epoch = [&] {
    auto out =
        f.request("p0", prfaas::make_remote({"p0", "client"}, {"p0", "pf"}, dir::Reannounce{}), 1s);
    f.run();
    REQUIRE(out->done);
    REQUIRE(out->reply);
    dir::BlocksStored all;
    REQUIRE(prfaas::parse_remote(*out->reply, all));
    CHECK(all.node() == "p0");
    return all.epoch();
  };
  const auto first = epoch();
  CHECK(first > 0);
  CHECK(first < 3'000'000'000ull); // nanoseconds of virtual time (2 s in), not of the wall clock
  const auto again = epoch();
  CHECK(again > first);
  auto old = f.at("p0").context().msgr().lookup("pf");
  const auto instant = f.now();
  caf::anon_send_exit(old, caf::exit_reason::kill);
  f.run(); // the supervisor restarts it; virtual time stands still
  REQUIRE(f.at("p0").context().msgr().lookup("pf") != old);
  REQUIRE(f.now() == instant);
  CHECK(epoch() > again);
}

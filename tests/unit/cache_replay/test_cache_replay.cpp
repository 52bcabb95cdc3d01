// The cache replay on synthetic traces whose hit counts are known by construction.
//
// Three sessions A, B, C share a one-block system prompt; turn k of a session has
// 2 + 2k full blocks of B tokens (its session's chain [sys, s1, s2, ...]) plus a
// 5-token tail, and each turn extends the previous one. Turns arrive interleaved
// A0 B0 C0 A1 B1 C1 ..., 100 s apart (every prefill has ended before the next).

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "cache_replay.hpp"

using namespace prfaas;
using namespace prfaas::sim;

namespace {

constexpr uint32_t B = 16; // block tokens: small prompts, same rules as 512

engine::profile h20() {
  auto p = engine::load_profile(PRFAAS_SOURCE_DIR "/configs/profiles/kimi-linear-1t-h20.yaml");
  REQUIRE(p.ok());
  return std::move(p).value();
}

/// Turn `k` of session `s` (1..3) arriving at `at_s`.
loadgen::request_spec turn(int s, int k, double at_s) {
  const uint32_t full = 2 + 2 * k;
  loadgen::request_spec r;
  r.arrival_s = at_s;
  r.input_tokens = full * B + 5;
  r.block_tokens = B;
  r.hash_ids.push_back(0);             // the shared system prompt
  for (uint32_t j = 1; j <= full; ++j) // the last one names the 5-token tail
    r.hash_ids.push_back(uint64_t(s) * 100 + j);
  return r;
}

std::vector<loadgen::request_spec> sessions() {
  std::vector<loadgen::request_spec> out;
  for (int k = 0; k < 4; ++k)
    for (int s = 1; s <= 3; ++s)
      out.push_back(turn(s, k, 100.0 * double(out.size())));
  return out;
}

replay_deployment pd_only(uint32_t workers, uint64_t cache_blocks) {
  return {.clusters = {{.name = "pd",
                        .prefill_workers = workers,
                        .cache_blocks = cache_blocks,
                        .profile = h20()}},
          .decode_workers = 1};
}

replay_deployment prfaas_pd(uint64_t cache_blocks) {
  auto d = pd_only(2, cache_blocks);
  d.clusters.push_back({.name = "prfaas",
                        .prfaas = true,
                        .prefill_workers = 2,
                        .cache_blocks = cache_blocks,
                        .profile = h20()});
  return d;
}

std::unique_ptr<serving::routing_policy> policy(const std::string& name, int64_t threshold = 0) {
  std::map<std::string, YAML::Node> p;
  if (threshold > 0)
    p["threshold"] = YAML::Node(threshold);
  auto out = serving::policy_registry::instance().make(name, {"test", p, nullptr});
  REQUIRE(out);
  return out;
}

const replay_options opts{.block_tokens = B, .index_capacity = 1 << 16};

} // namespace

TEST_CASE("cache replay: prompts are the bench's text, cut into the gateway's chained ids") {
  auto a = prompt_tokens(turn(1, 0, 0));
  auto c = prompt_tokens(turn(3, 1, 0));
  REQUIRE(a.size() == 2 * B + 5);
  REQUIRE(c.size() == 4 * B + 5);
  // The system block is shared, the next is each session's own.
  CHECK(std::equal(a.begin(), a.begin() + B, c.begin()));
  CHECK_FALSE(std::equal(a.begin() + B, a.begin() + 2 * B, c.begin() + B));
}

TEST_CASE("cache replay: the oracle reuses every earlier full-block prefix") {
  auto h = oracle(sessions(), opts);
  CHECK(h.requests == 12);
  // Per session: (2+4+6+8) blocks of 16 + 4 tails of 5; blocks (3+5+7+9).
  CHECK(h.prompt_tokens == 3 * (20 * B + 20));
  CHECK(h.prompt_blocks == 3 * 24);
  // Turn k reuses turn k-1's 2k full blocks (2+4+6 per session); B0 and C0 the system block.
  CHECK(h.hit_blocks == 3 * 12 + 2);
  CHECK(h.hit_tokens == (3 * 12 + 2) * B);
}

TEST_CASE("cache replay: the oracle leaves the last token to compute") {
  auto r = turn(1, 0, 0);
  r.input_tokens = 2 * B; // exactly two blocks, asked twice
  r.hash_ids.resize(2);
  auto h = oracle({r, r}, opts);
  CHECK(h.hit_blocks == 1);
}

TEST_CASE("cache replay: round robin over two PD workers gets the hand-computed hits") {
  auto rr = policy("homogeneous_pd_round_robin");
  auto r = replay(sessions(), *rr, pd_only(2, 1 << 12), opts);
  // A0 B0 C0 A1 B1 C1 A2 B2 C2 A3 B3 C3 alternate w0 w1: each session's turns alternate
  // workers, so turn k finds turn k-2's blocks (2k-2) and k = 0, 1 only the system block
  // where some session already passed: 0 0 1 1 1 1 2 2 2 4 4 4.
  CHECK(r.hits.requests == 12);
  CHECK(r.hits.hit_blocks == 22);
  CHECK(r.hits.hit_tokens == 22 * B);
  CHECK(r.offloaded == 0);
  CHECK(r.no_route == 0);
  CHECK(r.directory_overstated_tokens == 0);
}

TEST_CASE("cache replay: cache-affine placement through the directory matches the oracle") {
  // Idle workers, every announcement heard: the longest cached prefix wins each time.
  auto ca = policy("cache_aware_only");
  auto r = replay(sessions(), *ca, pd_only(2, 1 << 12), opts);
  CHECK(r.hits.hit_blocks == oracle(sessions(), opts).hit_blocks);
  CHECK(r.missed_affinity == 0);
  CHECK(r.directory_overstated_tokens == 0);
  CHECK(r.directory_understated_tokens == 0);
}

TEST_CASE("cache replay: the prfaas policy offloads only beyond the threshold") {
  auto reqs = sessions();
  SECTION("a threshold above every prompt keeps all in PD, cache-affine") {
    auto p = policy("prfaas", 1000000);
    auto r = replay(reqs, *p, prfaas_pd(1 << 12), opts);
    CHECK(r.offloaded == 0);
    CHECK(r.hits.hit_blocks == oracle(reqs, opts).hit_blocks);
  }
  SECTION("a threshold of 3 blocks: what PD would compute never exceeds it") {
    auto p = policy("prfaas", 3 * B);
    auto r = replay(reqs, *p, prfaas_pd(1 << 12), opts);
    // A0 computes 37 <= 48 in PD; every later turn finds its previous turn (or the
    // system block) in PD and computes 21 or 37 there: nothing is offloaded.
    CHECK(r.offloaded == 0);
    CHECK(r.hits.hit_blocks == oracle(reqs, opts).hit_blocks);
  }
  SECTION("a threshold of 1 block offloads every uncached part longer than 16") {
    auto p = policy("prfaas", B);
    auto r = replay(reqs, *p, prfaas_pd(1 << 12), opts);
    // PD never caches anything, so each request computes all of it there (> 16): all go
    // to the PrfaaS side, whose caches (cache-affine placement) then reach the oracle.
    CHECK(r.offloaded == 12);
    CHECK(r.hits.hit_blocks == oracle(reqs, opts).hit_blocks);
  }
}

TEST_CASE("cache replay: the directory hears of a prefill only when it ends") {
  auto ca = policy("cache_aware_only");
  SECTION("the next turn arrives after the first prefill ended: it follows the cache") {
    auto r = replay({turn(1, 0, 0), turn(1, 1, 100)}, *ca, pd_only(2, 1 << 12), opts);
    CHECK(r.hits.hit_blocks == 2);
  }
  SECTION("it arrives while the first still runs: unknown to the directory, and the busy "
          "worker loses to the idle one") {
    auto r = replay({turn(1, 0, 0), turn(1, 1, 1e-6)}, *ca, pd_only(2, 1 << 12), opts);
    CHECK(r.hits.hit_blocks == 0);
  }
}

TEST_CASE("cache replay: a bounded cache evicts and the directory follows") {
  auto ca = policy("cache_aware_only");
  // One worker holding 2 blocks (4 pool blocks: KV + checkpoint each). A0 caches
  // [sys, A1]; B0 reuses sys (pinned) and its B1 pushes A1 out (checkpoint first, then
  // the KV); A0 asked again finds sys only — the directory says no more than that — and
  // its A1 pushes B1 out in turn.
  auto r = replay({turn(1, 0, 0), turn(2, 0, 100), turn(1, 0, 200)}, *ca, pd_only(1, 4), opts);
  CHECK(r.hits.hit_blocks == 0 + 1 + 1);
  CHECK(r.cache_evictions == 2);
  CHECK(r.directory_overstated_tokens == 0);
}

TEST_CASE("cache replay: no cache, no hits") {
  auto ca = policy("cache_aware_only");
  auto r = replay(sessions(), *ca, pd_only(2, 0), opts);
  CHECK(r.hits.hit_blocks == 0);
  CHECK(r.hits.requests == 12);
}

TEST_CASE("cache replay: a deployment without workers is refused") {
  auto rr = policy("homogeneous_pd");
  CHECK_THROWS_AS(replay(sessions(), *rr, pd_only(0, 16), opts), std::invalid_argument);
  auto d = pd_only(1, 16);
  d.decode_workers = 0;
  CHECK_THROWS_AS(replay(sessions(), *rr, d, opts), std::invalid_argument);
}

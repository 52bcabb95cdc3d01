// The PrfaaS policy (paper §3.4.3) and its baselines, on hand-made cluster views:
// offload on the *uncached* length, scarce vs abundant bandwidth with hysteresis,
// cache moves in abundant mode, cache-affine and load-aware node choice, offload by
// expected time to the KV (`offload: cost`), and the baselines' placement rules.

#include <algorithm>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "scheduler/prfaas_policy.hpp"

using namespace prfaas::serving;

namespace {

std::unique_ptr<routing_policy> make(const std::string& name, int64_t threshold = 1000,
                                     bool move_caches = true,
                                     const std::string& offload = "threshold") {
  prfaas::actor_params p{"sched",
                         {{"threshold", YAML::Node(threshold)},
                          {"move_caches", YAML::Node(move_caches)},
                          {"offload", YAML::Node(offload)},
                          {"scarce_utilisation", YAML::Node(0.8)},
                          {"abundant_utilisation", YAML::Node(0.5)},
                          {"scarce_queue_tokens", YAML::Node(100000)},
                          {"abundant_queue_tokens", YAML::Node(10000)},
                          {"load_weight", YAML::Node(1.0)}},
                         nullptr};
  auto policy = policy_registry::instance().make(name, p);
  REQUIRE(policy);
  return policy;
}

worker_view worker(const std::string& node, bool prfaas) {
  worker_view w;
  w.addr = {node, prfaas ? "p" : "pdp"};
  w.cluster = prfaas ? "prfaas" : "pd";
  w.prfaas = prfaas;
  return w;
}

/// Two PrfaaS prefill workers (0, 1), two PD prefill workers (2, 3), one decode worker.
cluster_view view() {
  cluster_view v;
  v.prefill = {worker("pf-0", true), worker("pf-1", true), worker("pd-0", false),
               worker("pd-1", false)};
  v.decode = {worker("dec", false)};
  v.decode[0].capacity = 8;
  return v;
}

route_input prompt(uint32_t tokens, std::map<std::string, uint32_t> cached = {}) {
  route_input in;
  in.prompt_tokens = tokens;
  in.cached_by_node = std::move(cached);
  return in;
}

} // namespace

TEST_CASE("the policy and its baselines are registered by name") {
  auto names = policy_registry::instance().names();
  for (const char* n : {"prfaas", "homogeneous_pd", "homogeneous_pd_round_robin", "kv_router",
                        "naive_heterogeneous", "cache_aware_only"}) {
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
    CHECK(make(n)->name() == n);
  }
}

TEST_CASE("bandwidth_mode: scarce at the high bounds, abundant only below both low bounds") {
  bandwidth_mode m{{.scarce_utilisation = 0.8,
                    .abundant_utilisation = 0.5,
                    .scarce_queue_tokens = 1000,
                    .abundant_queue_tokens = 100}};
  CHECK_FALSE(m.update(0.79, 999));
  CHECK(m.update(0.8, 0));   // utilisation reaches its bound
  CHECK(m.update(0.6, 0));   // between the bounds: stays scarce (no flapping)
  CHECK(m.update(0.5, 500)); // utilisation low, queue not yet
  CHECK_FALSE(m.update(0.5, 100));
  CHECK_FALSE(m.update(0.7, 900)); // between the bounds again: stays abundant
  CHECK(m.update(0.0, 1000));      // the queue alone makes it scarce
}

TEST_CASE("prfaas offloads on the uncached length, not the prompt length") {
  auto p = make("prfaas", 1000);
  auto v = view();
  auto cold = p->decide(prompt(5000), v);
  CHECK(cold.route == "prfaas");
  CHECK(cold.uncached_tokens == 5000);
  CHECK(cold.mode == "abundant");
  // 4,500 of 5,000 tokens cached in the PD cluster: 500 uncached <= t, so local.
  auto warm = p->decide(prompt(5000, {{"pd-1", 4500}}), v);
  CHECK(warm.route == "pd");
  CHECK(warm.prefill == 3); // the node holding the cache
  CHECK(warm.uncached_tokens == 500);
  CHECK_FALSE(warm.move_cache);
  CHECK(p->decide(prompt(1000), v).route == "pd");
  CHECK(p->decide(prompt(1001), v).route == "prfaas");
}

TEST_CASE("prfaas, abundant bandwidth: the best cache anywhere counts and moves to the prefill") {
  auto p = make("prfaas", 1000);
  auto v = view();
  // The PrfaaS cluster holds 4,500 tokens: uncached 500 <= t, so PD-P prefills and the
  // cache crosses the link to it.
  auto c = p->decide(prompt(5000, {{"pf-1", 4500}}), v);
  CHECK(c.mode == "abundant");
  CHECK(c.route == "pd");
  CHECK(c.move_cache);
  CHECK(c.uncached_tokens == 500);
  // Long and cached in PD: offloaded, the PD cache moves to the PrfaaS node.
  auto d = p->decide(prompt(20000, {{"pd-0", 4000}}), v);
  CHECK(d.route == "prfaas");
  CHECK(d.move_cache);
  CHECK(d.uncached_tokens == 16000);
}

TEST_CASE("prfaas, scarce bandwidth: each cluster's cache is judged on its own") {
  auto p = make("prfaas", 1000);
  auto v = view();
  v.link_utilisation = 0.9; // above scarce_utilisation
  // Cached only on the PrfaaS side: PD would compute 5,000 > t, so it is offloaded
  // to where its cache is, and nothing moves.
  auto c = p->decide(prompt(5000, {{"pf-1", 4500}}), v);
  CHECK(c.mode == "scarce");
  CHECK(c.route == "prfaas");
  CHECK(c.prefill == 1);
  CHECK_FALSE(c.move_cache);
  CHECK(c.uncached_tokens == 500);
  // Cached in PD: l_total - l_pd = 800 <= t, local.
  auto d = p->decide(prompt(5000, {{"pd-0", 4200}}), v);
  CHECK(d.route == "pd");
  CHECK(d.prefill == 2);
  // The mode has hysteresis: utilisation between the bounds keeps it scarce.
  v.link_utilisation = 0.6;
  CHECK(p->decide(prompt(5000), v).mode == "scarce");
  v.link_utilisation = 0.4;
  CHECK(p->decide(prompt(5000), v).mode == "abundant");
}

TEST_CASE("prfaas: a long PrfaaS queue alone makes bandwidth scarce") {
  auto p = make("prfaas", 1000);
  auto v = view();
  v.prefill[0].queued_tokens = 60000;
  v.prefill[1].queued_tokens = 50000; // 110,000 >= scarce_queue_tokens
  CHECK(p->decide(prompt(5000), v).mode == "scarce");
}

TEST_CASE("prfaas: link down or local_only means no offload, whatever the length") {
  auto p = make("prfaas", 1000);
  auto v = view();
  v.link_up = false;
  CHECK(p->decide(prompt(100000), v).route == "pd");
  v.link_up = true;
  auto in = prompt(100000);
  in.local_only = true;
  CHECK(p->decide(in, v).route == "pd");
  in.local_only = false;
  in.exclude_nodes = {"pf-0", "pf-1"}; // both PrfaaS nodes failed this request
  CHECK(p->decide(in, v).route == "pd");
}

TEST_CASE("cache-affine, load-aware placement: a cache outweighs a small queue, not a long one") {
  auto v = view();
  auto in = prompt(10000, {{"pf-0", 6000}});
  CHECK(best_prefill(v, in, true, 1.0) == 0); // cost 4,000 vs 10,000
  v.prefill[0].queued_tokens = 5000;          // 4,000 + 5,000 > 10,000 + 0? no: 9,000 < 10,000
  CHECK(best_prefill(v, in, true, 1.0) == 0);
  v.prefill[0].queued_tokens = 7000; // 11,000 > 10,000
  CHECK(best_prefill(v, in, true, 1.0) == 1);
  v.prefill[1].up = false;
  CHECK(best_prefill(v, in, true, 1.0) == 0); // the only one left
}

TEST_CASE("homogeneous_pd: PD prefill only, to the least pending work, skipping down workers") {
  // Changed on purpose from round robin: a homogeneous-PD operator runs a load-aware
  // router, and the baseline prfaas is compared with must be the strongest one.
  auto p = make("homogeneous_pd");
  auto v = view();
  v.prefill[2].queued_tokens = 5000;
  v.prefill[3].queued_tokens = 1000;
  v.prefill[0].queued_tokens = 0; // idle, but across the link: never chosen
  CHECK(p->decide(prompt(100000), v).prefill == 3);
  CHECK(p->decide(prompt(100000), v).prefill == 3); // not alternating: still the lighter one
  v.prefill[3].queued_tokens = 9000;
  auto c = p->decide(prompt(10), v);
  CHECK(c.prefill == 2);
  CHECK(c.route == "pd");
  {
    auto in = prompt(10); // failover: the node that failed it is not asked again
    in.exclude_nodes = {"pd-0"};
    CHECK(p->decide(in, v).prefill == 3);
  }
  v.prefill[2].up = false;
  CHECK(p->decide(prompt(10), v).prefill == 3);
  v.prefill[3].up = false;
  auto none = p->decide(prompt(10), v);
  CHECK(none.prefill == -1);
  CHECK(none.why_not == "no prefill worker is up");
}

TEST_CASE("homogeneous_pd_round_robin: PD prefill only, round robin, skipping down workers") {
  auto p = make("homogeneous_pd_round_robin");
  auto v = view();
  v.prefill[2].queued_tokens = 100000; // load-blind: still gets its turn
  std::vector<int> seen;
  for (int i = 0; i < 4; ++i)
    seen.push_back(p->decide(prompt(100000), v).prefill);
  CHECK(seen == std::vector<int>{2, 3, 2, 3});
  v.prefill[2].up = false;
  CHECK(p->decide(prompt(10), v).prefill == 3);
  CHECK(p->decide(prompt(10), v).prefill == 3);
  v.prefill[3].up = false;
  auto none = p->decide(prompt(10), v);
  CHECK(none.prefill == -1);
  CHECK(none.why_not == "no prefill worker is up");
}

TEST_CASE("kv_router: uncached tokens + pending work + decoding on the node, PD workers only") {
  auto p = make("kv_router");
  auto v = view();
  // The cache decides between equally loaded workers, and a cache across the link
  // does not count: kv_router never offloads.
  auto c = p->decide(prompt(10000, {{"pd-1", 9000}, {"pf-0", 10000}}), v);
  CHECK(c.prefill == 3);
  CHECK(c.route == "pd");
  CHECK(c.uncached_tokens == 1000);
  // Pending work outweighs the cache: 1,000 + 9,500 > 10,000 + 0.
  v.prefill[3].queued_tokens = 9500;
  CHECK(p->decide(prompt(10000, {{"pd-1", 9000}}), v).prefill == 2);
  // Sequences decoding on a prefill worker's node count against it (decode_weight 512
  // tokens each by default): pd-0 with 2 decoding costs 10,000 + 1,024 > 10,500.
  v.decode.push_back(worker("pd-0", false));
  v.decode.back().capacity = 8;
  v.decode.back().active = 2;
  CHECK(p->decide(prompt(10000, {{"pd-1", 9000}}), v).prefill == 3);
  v.prefill[2].up = false;
  v.prefill[3].up = false;
  CHECK(p->decide(prompt(10), v).why_not == "no prefill worker is up");
}

TEST_CASE("naive_heterogeneous: PrfaaS prefill for every length while the link is up") {
  auto p = make("naive_heterogeneous");
  auto v = view();
  CHECK(p->decide(prompt(1), v).route == "prfaas");
  CHECK(p->decide(prompt(100000, {{"pd-0", 99999}}), v).route == "prfaas");
  v.link_up = false;
  CHECK(p->decide(prompt(100000), v).route == "pd");
}

TEST_CASE("cache_aware_only: the best cache/load trade-off anywhere, no threshold") {
  auto p = make("cache_aware_only");
  auto v = view();
  auto c = p->decide(prompt(10000, {{"pd-1", 9000}}), v);
  CHECK(c.prefill == 3);
  auto d = p->decide(prompt(10000, {{"pf-0", 9000}}), v);
  CHECK(d.prefill == 0);
  CHECK(d.route == "prfaas"); // no threshold: short uncached work still crosses
  v.link_up = false;
  CHECK(p->decide(prompt(10000, {{"pf-0", 9000}}), v).route == "pd");
}

TEST_CASE(
    "prfaas without cache moves: a cache only counts in its own cluster, whatever the bandwidth") {
  auto p = make("prfaas", 1000, /*move_caches=*/false);
  auto v = view();
  // Abundant bandwidth, cache on the PrfaaS side: PD would compute everything, so the
  // request goes to the cache instead of to PD-P with a cache it cannot have.
  auto c = p->decide(prompt(5000, {{"pf-1", 4500}}), v);
  CHECK(c.mode == "abundant");
  CHECK(c.route == "prfaas");
  CHECK(c.prefill == 1);
  CHECK_FALSE(c.move_cache);
  CHECK(c.uncached_tokens == 500);
}

namespace {

/// view() with measured paces: PrfaaS workers 1,000 tokens/s, PD workers 250; the
/// model ships 100 KB of KV per token over a 1 Gbit/s link.
cluster_view paced_view() {
  auto v = view();
  for (auto& w : v.prefill)
    w.tokens_per_s = w.prfaas ? 1000 : 250;
  v.kv_bytes = [](uint64_t tokens) { return static_cast<double>(tokens) * 1e5; };
  v.link_capacity_bps = 1e9;
  return v;
}

} // namespace

TEST_CASE(
    "expected_ready_seconds: queue and uncached work at the pace, plus the unhidden KV tail") {
  auto v = paced_view();
  v.prefill[2].queued_tokens = 500;
  // PD worker: (500 queued + 1,000 uncached) / 250 tokens/s.
  CHECK(expected_ready_seconds(v, prompt(1000), 2) == Approx(6.0));
  // A cached prefix counts only on the worker that holds it.
  CHECK(expected_ready_seconds(v, prompt(1000, {{"pd-0", 600}}), 2) == Approx(3.6));
  CHECK(expected_ready_seconds(v, prompt(1000, {{"pd-0", 600}}), 3) == Approx(4.0));
  // PrfaaS worker, 8,000 tokens: 8 s of compute hides 6.4 s of transfer (8e8 B at 1 Gbit/s).
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(8.0));
  // At 100 Mbit/s the transfer takes 64 s: 56 s of it are not hidden.
  v.link_capacity_bps = 1e8;
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(64.0));
  // Half the link is in use: the transfer gets the other half.
  v.link_capacity_bps = 1e9;
  v.link_utilisation = 0.5;
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(12.8));
  // Whatever the link already holds comes first; it drains while the prefill computes:
  // 2 s of backlog, then 6.4 s of transfer, ends after the 8 s of compute.
  v.link_utilisation = 0;
  v.link_queue_seconds = 2;
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(8.4));
  // So does the KV of prefills queued on the PrfaaS side, on any worker: 4,000 tokens
  // queued on pf-1 are 3.2 s more of transfer ahead of this one.
  v.prefill[1].queued_tokens = 4000;
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(11.6));
  // Queued on the same worker, the prefill starts later too (4 s), and its transfer
  // cannot start before it: max(4 + 8, max(4, 2 + 3.2) + 6.4) = 12.
  v.prefill[1].queued_tokens = 0;
  v.prefill[0].queued_tokens = 4000;
  CHECK(expected_ready_seconds(v, prompt(8000), 0) == Approx(12.0));
  v.prefill[0].queued_tokens = 0;
  v.link_queue_seconds = 0;
  // A worker without its own pace counts at its cluster's mean; a cluster without any: -1.
  v.prefill[3].tokens_per_s = 0;
  CHECK(expected_ready_seconds(v, prompt(1000), 3) == Approx(4.0));
  v.prefill[2].tokens_per_s = 0;
  CHECK(expected_ready_seconds(v, prompt(1000), 3) == -1);
}

TEST_CASE("prfaas, offload by cost: the worker with the KV ready soonest, either cluster") {
  auto p = make("prfaas", 1000, false, "cost");
  auto v = paced_view();
  // A short prompt (below t) on idle workers: the H200-like PrfaaS worker is 4x faster.
  auto short_one = p->decide(prompt(500), v);
  CHECK(short_one.route == "prfaas");
  CHECK(short_one.basis == "cost");
  CHECK(short_one.threshold == 1000); // t is still reported: the planned point
  // The same prompt with 10,000 tokens queued on each PrfaaS worker: the PD side is sooner.
  v.prefill[0].queued_tokens = v.prefill[1].queued_tokens = 10000;
  CHECK(p->decide(prompt(500), v).route == "pd");
  v.prefill[0].queued_tokens = v.prefill[1].queued_tokens = 0;
  // 8,000 tokens, 6,500 cached on pd-0: 1,500 uncached there (6 s) beat 8 s on PrfaaS,
  // although the uncached length is above t.
  auto warm = p->decide(prompt(8000, {{"pd-0", 6500}}), v);
  CHECK(warm.route == "pd");
  CHECK(warm.prefill == 2);
  CHECK(warm.uncached_tokens == 1500);
  // A slow link: 8,000 cold tokens take 32 s on PD, 64 s to arrive from PrfaaS.
  v.link_capacity_bps = 1e8;
  CHECK(p->decide(prompt(8000), v).route == "pd");
  v.link_capacity_bps = 1e9;
  CHECK(p->decide(prompt(8000), v).route == "prfaas");
  // The threshold basis, same view: the short prompt stays home.
  auto by_t = make("prfaas", 1000, false)->decide(prompt(500), v);
  CHECK(by_t.route == "pd");
  CHECK(by_t.basis == "threshold");
}

TEST_CASE("prfaas, offload by cost: t decides while a cluster has no pace or the link binds") {
  auto p = make("prfaas", 1000, false, "cost");
  auto v = paced_view();
  // No pace measured yet on the PrfaaS side: the planned t.
  v.prefill[0].tokens_per_s = v.prefill[1].tokens_per_s = 0;
  auto unknown = p->decide(prompt(500), v);
  CHECK(unknown.route == "pd");
  CHECK(unknown.basis == "threshold");
  // The link binds (utilisation past the scarce bound): t, fitted to the link, decides.
  // (Without the model's KV size t stays at its planned 1,000, so what decides is plain.)
  v = paced_view();
  v.kv_bytes = {};
  v.link_utilisation = 0.9;
  auto bound = p->decide(prompt(500), v);
  CHECK(bound.mode == "scarce");
  CHECK(bound.basis == "threshold");
  CHECK(bound.route == "pd");
  // Link down or local_only: never across, whatever the cost says.
  v = paced_view();
  v.link_up = false;
  CHECK(p->decide(prompt(500), v).route == "pd");
  v.link_up = true;
  auto local = prompt(500);
  local.local_only = true;
  CHECK(p->decide(local, v).route == "pd");
  // A failed PrfaaS node is excluded; the other PrfaaS worker is still the soonest.
  auto retry = prompt(500);
  retry.exclude_nodes = {"pf-0"};
  auto r = p->decide(retry, v);
  CHECK(r.prefill == 1);
}

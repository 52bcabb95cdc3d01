// The prfaas policy's short-term controller: the re-search of t over the recent
// requests' uncached lengths against the link's usable bandwidth, its bounds, its
// no-flapping rules, and what the policy routes while it acts. KV size is one byte
// per token (8 bits) so every expected value below is computed by hand.

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "scheduler/prfaas_policy.hpp"
#include "scheduler/threshold_controller.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;

namespace {

double one_byte_per_token(uint64_t tokens) { return static_cast<double>(tokens); }

threshold_controller::settings settings(uint64_t planned = 1000, uint64_t max = 100000) {
  threshold_controller::settings s;
  s.planned = planned;
  s.max = max;
  s.target_utilisation = 1.0;
  s.window = 10s;
  s.retune_interval = 2s;
  return s;
}

const threshold_controller::time_point t0{std::chrono::seconds(100)};

} // namespace

TEST_CASE("search: the smallest t whose egress fits the budget, longest requests first") {
  const std::vector<uint64_t> lengths{3000, 10000, 6000, 8000, 500};
  // 10000 + 8000 tokens = 144000 bits in 1 s fit; adding 6000 does not: t = 6000.
  CHECK(threshold_controller::search(lengths, 1.0, 144000, one_byte_per_token, 1000, 100000) == 6000);
  // One bit short of the two longest: only 10000 fits, t = 8000.
  CHECK(threshold_controller::search(lengths, 1.0, 143999, one_byte_per_token, 1000, 100000) == 8000);
  // Everything above the planned t fits: back to the planned t.
  CHECK(threshold_controller::search(lengths, 1.0, 1e9, one_byte_per_token, 1000, 100000) == 1000);
  // Over a longer span the same traffic is a lower rate: 27000 tokens / 2 s fit 108000 bits/s.
  CHECK(threshold_controller::search(lengths, 2.0, 108000, one_byte_per_token, 1000, 100000) == 1000);
  // Not even the longest fits, and it is above the bound: t stops at the bound.
  CHECK(threshold_controller::search(lengths, 1.0, 10, one_byte_per_token, 1000, 7000) == 7000);
  CHECK(threshold_controller::search({}, 1.0, 10, one_byte_per_token, 1000, 7000) == 1000);
}

TEST_CASE("requests of one length offload together: t never splits them") {
  const std::vector<uint64_t> lengths{5000, 5000, 5000};
  // One 5000 would fit (40000 bits), all three do not: t = 5000 offloads none of them.
  CHECK(threshold_controller::search(lengths, 1.0, 40000, one_byte_per_token, 1000, 100000) == 5000);
}

TEST_CASE("controller: planned t while abundant, re-searched on entering scarce") {
  threshold_controller c{settings(), one_byte_per_token};
  for (uint64_t l : {10000, 8000, 6000, 3000})
    c.observe(t0, l);
  // Abundant: the planned t whatever the traffic.
  CHECK(c.update(t0 + 1s, false, {.capacity_bps = 1e6}) == 1000);
  CHECK(c.retunes() == 0);
  // Scarce, link backed up and delivering 144000 bits/s (below its capacity): over the
  // 1 s span of the samples, 10000 + 8000 fit; t = 6000.
  CHECK(c.update(t0 + 1s, true,
                 {.capacity_bps = 1e6, .throughput_bps = 144000, .backlog_bytes = 1}) == 6000);
  CHECK(c.retunes() == 1);
}

TEST_CASE("controller: within a scarce episode t only rises, at most once per retune interval") {
  threshold_controller c{settings(), one_byte_per_token};
  const threshold_controller::link_signals slow{.capacity_bps = 1e6, .throughput_bps = 80000,
                                                .backlog_bytes = 1};
  c.observe(t0, 10000);
  c.observe(t0, 4000);
  // 10000 tokens in the 1 s minimum span fit 80000 bits/s; 4000 more would not: t = 4000.
  CHECK(c.update(t0, true, slow) == 4000);
  // More long traffic at once: not re-searched before the retune interval.
  c.observe(t0 + 1s, 20000);
  CHECK(c.update(t0 + 1s, true, slow) == 4000);
  CHECK(c.retunes() == 1);
  // After it: 30000 tokens over 2.5 s need 96000 bits/s > 80000; only the 20000 fits
  // (64000 bits/s): t = 10000.
  CHECK(c.update(t0 + 2500ms, true, slow) == 10000);
  // Much more bandwidth, still scarce (mode hysteresis): the search would say 1000,
  // but t does not fall within the episode.
  CHECK(c.update(t0 + 5s, true, {.capacity_bps = 1e9}) == 10000);
  // Abundant: back toward the planned t in halvings, one per retune interval (the
  // last re-search was at 5 s).
  CHECK(c.update(t0 + 6s, false, {.capacity_bps = 1e9}) == 10000);
  CHECK(c.update(t0 + 7s, false, {.capacity_bps = 1e9}) == 5000);
  CHECK(c.update(t0 + 8s, false, {.capacity_bps = 1e9}) == 5000);
  CHECK(c.update(t0 + 9s, false, {.capacity_bps = 1e9}) == 2500);
  CHECK(c.update(t0 + 11s, false, {.capacity_bps = 1e9}) == 1250);
  CHECK(c.update(t0 + 13s, false, {.capacity_bps = 1e9}) == 1000);
  CHECK(c.update(t0 + 15s, false, {.capacity_bps = 1e9}) == 1000);
}

TEST_CASE("controller: t is bounded by max, and old samples leave the window") {
  threshold_controller c{settings(1000, 5000), one_byte_per_token};
  c.observe(t0, 50000);
  CHECK(c.update(t0, true, {.capacity_bps = 8, .throughput_bps = 8, .backlog_bytes = 1}) == 5000);
  threshold_controller w{settings(), one_byte_per_token};
  w.observe(t0, 50000);
  // 11 s later the sample is outside the 10 s window: nothing to search with, t stays.
  CHECK(w.update(t0 + 11s, true, {.capacity_bps = 8, .throughput_bps = 8, .backlog_bytes = 1}) == 1000);
  CHECK(w.retunes() == 0);
}

namespace {

std::unique_ptr<routing_policy> prfaas_policy(int64_t threshold) {
  prfaas::actor_params p{"sched",
                         {{"threshold", YAML::Node(threshold)},
                          {"max_threshold", YAML::Node(200000)},
                          {"target_utilisation", YAML::Node(1.0)},
                          {"scarce_utilisation", YAML::Node(0.8)},
                          {"abundant_utilisation", YAML::Node(0.5)},
                          {"scarce_queue_tokens", YAML::Node(1000000)},
                          {"abundant_queue_tokens", YAML::Node(100000)},
                          {"backlog_horizon", YAML::Node("1s")},
                          {"retune_interval", YAML::Node("2s")},
                          {"control_window", YAML::Node("10s")}},
                         nullptr};
  return policy_registry::instance().make("prfaas", p);
}

cluster_view two_sides() {
  cluster_view v;
  worker_view pf{.addr = {"pf-0", "p"}, .cluster = "prfaas", .prfaas = true};
  worker_view pd{.addr = {"pd-0", "pdp"}, .cluster = "pd", .prfaas = false};
  worker_view dec{.addr = {"pd-0", "dec"}, .cluster = "pd", .prfaas = false, .capacity = 8};
  v.prefill = {pf, pd};
  v.decode = {dec};
  v.kv_bytes = one_byte_per_token;
  v.link_capacity_bps = 1e6;
  return v;
}

route_input prompt(uint32_t tokens) {
  route_input in;
  in.prompt_tokens = tokens;
  return in;
}

} // namespace

TEST_CASE("prfaas policy: a backed-up link makes bandwidth scarce and raises t, abundant brings it back") {
  auto p = prfaas_policy(1000);
  auto v = two_sides();
  v.now = t0;
  // Abundant: 30000-token prompts go to the PrfaaS cluster at the planned t.
  for (int i = 0; i < 3; ++i) {
    auto c = p->decide(prompt(30000), v);
    CHECK(c.mode == "abundant");
    CHECK(c.threshold == 1000);
    CHECK(c.route == "prfaas");
  }
  auto short_one = p->decide(prompt(500), v);
  CHECK(short_one.route == "pd");
  // The link is cut below its rate: it delivers 300000 bits/s and a backlog that
  // needs 1 s to drain builds up (pressure = 0.3 + 1.0 ≥ 0.8): scarce. 90000 tokens of long prompts
  // in the 1 s span need 720000 bits/s; the 30000-token class does not fit, so t
  // rises to 30000 and those prompts now prefill in the PD cluster.
  v.now = t0 + 1s;
  v.link_utilisation = 0.3;
  v.link_throughput_bps = 300000;
  v.link_backlog_bytes = 37500;
  v.link_queue_seconds = 1.0;
  auto c = p->decide(prompt(30000), v);
  CHECK(c.mode == "scarce");
  CHECK(c.threshold == 30000);
  CHECK(c.route == "pd");
  // Longer prompts still go across.
  CHECK(p->decide(prompt(40000), v).route == "prfaas");
  // The backlog drains and utilisation falls below the abundant bound: t halves back
  // to the planned one, a step per retune interval (2 s).
  v.link_utilisation = 0.2;
  v.link_backlog_bytes = 0;
  v.link_queue_seconds = 0;
  std::vector<uint64_t> steps;
  for (int i = 0; i < 6; ++i) {
    v.now = t0 + std::chrono::seconds(20 + 2 * i);
    auto back = p->decide(prompt(30000), v);
    CHECK(back.mode == "abundant");
    CHECK(back.route == "prfaas");
    steps.push_back(back.threshold);
  }
  CHECK(steps == std::vector<uint64_t>{15000, 7500, 3750, 1875, 1000, 1000});
}

TEST_CASE("prfaas policy: a full PrfaaS queue on an idle link is scarce for caches, but t stays planned") {
  auto p = prfaas_policy(1000);
  auto v = two_sides();
  v.now = t0;
  v.prefill[0].queued_tokens = 2000000; // above scarce_queue_tokens; the link idles
  for (int i = 0; i < 5; ++i) {
    v.now = t0 + std::chrono::seconds(i);
    auto c = p->decide(prompt(30000), v);
    CHECK(c.mode == "scarce");
    CHECK(c.threshold == 1000);
  }
}

TEST_CASE("prfaas policy: link down means no offload at any length, and offload resumes when up") {
  auto p = prfaas_policy(1000);
  auto v = two_sides();
  v.now = t0;
  v.link_up = false;
  CHECK(p->decide(prompt(1000000), v).route == "pd");
  v.link_up = true;
  CHECK(p->decide(prompt(1000000), v).route == "prfaas");
}

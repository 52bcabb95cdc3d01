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

double one_byte_per_token(uint64_t tokens) {
  return static_cast<double>(tokens);
}

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
  CHECK(threshold_controller::search(lengths, 1.0, 144000, one_byte_per_token, 1000, 100000) ==
        6000);
  // One bit short of the two longest: only 10000 fits, t = 8000.
  CHECK(threshold_controller::search(lengths, 1.0, 143999, one_byte_per_token, 1000, 100000) ==
        8000);
  // Everything above the planned t fits: back to the planned t.
  CHECK(threshold_controller::search(lengths, 1.0, 1e9, one_byte_per_token, 1000, 100000) == 1000);
  // Over a longer span the same traffic is a lower rate: 27000 tokens / 2 s fit 108000 bits/s.
  CHECK(threshold_controller::search(lengths, 2.0, 108000, one_byte_per_token, 1000, 100000) ==
        1000);
  // Not even the longest fits, and it is above the bound: t stops at the bound.
  CHECK(threshold_controller::search(lengths, 1.0, 10, one_byte_per_token, 1000, 7000) == 7000);
  CHECK(threshold_controller::search({}, 1.0, 10, one_byte_per_token, 1000, 7000) == 1000);
}

TEST_CASE("requests of one length offload together: t never splits them") {
  const std::vector<uint64_t> lengths{5000, 5000, 5000};
  // One 5000 would fit (40000 bits), all three do not: t = 5000 offloads none of them.
  CHECK(threshold_controller::search(lengths, 1.0, 40000, one_byte_per_token, 1000, 100000) ==
        5000);
}

TEST_CASE("controller: planned t while abundant, re-searched on entering scarce") {
  threshold_controller c{settings(), one_byte_per_token};
  for (uint64_t l : {10000, 8000, 6000, 3000})
    c.observe(t0, l);
  // Abundant: the planned t whatever the traffic.
  CHECK(c.update(t0 + 1s, false, {.capacity_bps = 1e6}) == 1000);
  CHECK(c.retunes() == 0);
  CHECK(std::string(c.last_reason()).empty()); // t has not moved
  // Scarce, link backed up and delivering 144000 bits/s (below its capacity): over the
  // 1 s span of the samples, 10000 + 8000 fit; t = 6000.
  CHECK(c.update(t0 + 1s, true,
                 {.capacity_bps = 1e6, .throughput_bps = 144000, .backlog_bytes = 1}) == 6000);
  CHECK(c.retunes() == 1);
  CHECK(std::string(c.last_reason()) == "link_fit");
  // Abundant again: back toward the plan, and that is why it moved.
  CHECK(c.update(t0 + 4s, false, {.capacity_bps = 1e6}) == 3000);
  CHECK(std::string(c.last_reason()) == "back_to_plan");
}

TEST_CASE("controller: within a scarce episode t only rises, at most once per retune interval") {
  threshold_controller c{settings(), one_byte_per_token};
  const threshold_controller::link_signals slow{
      .capacity_bps = 1e6, .throughput_bps = 80000, .backlog_bytes = 1};
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
  CHECK(w.update(t0 + 11s, true, {.capacity_bps = 8, .throughput_bps = 8, .backlog_bytes = 1}) ==
        1000);
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

TEST_CASE("prfaas policy: a backed-up link makes bandwidth scarce and raises t, abundant brings it "
          "back") {
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

TEST_CASE("prfaas policy: a full PrfaaS queue on an idle link is scarce for caches, but t stays "
          "planned") {
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

// -- balancing: t follows the cluster whose prefill wait is longer ---------------------

namespace {

threshold_controller::settings balancing(uint64_t planned = 16000) {
  auto s = settings(planned, 1u << 20);
  s.min = 100;
  s.balance_ratio = 1.5;
  s.balance_slack_s = 2.0;
  s.balance_step = 2.0; // round numbers below
  return s;
}

threshold_controller::queue_signals waits(double pd, double prfaas, double pd_pace = 0) {
  return {pd, prfaas, pd_pace};
}

} // namespace

TEST_CASE("balancing: a PD cluster that stays behind lowers t a step per retune interval, never "
          "below min") {
  threshold_controller c{balancing(), one_byte_per_token};
  const threshold_controller::link_signals idle{.capacity_bps = 1e9};
  // PD waits 30 s, the PrfaaS side 1 s: behind, but not yet for a retune interval.
  CHECK(c.update(t0, false, idle, waits(30, 1)) == 16000);
  CHECK(std::string{c.behind()} == "pd");
  CHECK(c.update(t0 + 1s, false, idle, waits(30, 1)) == 16000);
  // Two seconds behind: one step down, then one per retune interval (2 s).
  CHECK(c.update(t0 + 2s, false, idle, waits(30, 1)) == 8000);
  CHECK(c.update(t0 + 3s, false, idle, waits(30, 1)) == 8000);
  CHECK(c.update(t0 + 4s, false, idle, waits(30, 1)) == 4000);
  for (int i = 3; i < 12; ++i)
    c.update(t0 + std::chrono::seconds(2 * i), false, idle, waits(30, 1));
  CHECK(c.threshold() == 100); // the floor
  CHECK(c.retunes() == 8);     // 16000 → 8000 → ... → 125 → 100
}

TEST_CASE("balancing: a PrfaaS side behind (its queue or the link's) raises t, never above max") {
  auto s = balancing();
  s.max = 50000;
  threshold_controller c{s, one_byte_per_token};
  const threshold_controller::link_signals idle{.capacity_bps = 1e9};
  c.update(t0, false, idle, waits(0.5, 20));
  CHECK(std::string{c.behind()} == "prfaas");
  CHECK(c.update(t0 + 2s, false, idle, waits(0.5, 20)) == 32000);
  CHECK(c.update(t0 + 4s, false, idle, waits(0.5, 20)) == 50000);
  CHECK(c.update(t0 + 6s, false, idle, waits(0.5, 20)) == 50000);
}

TEST_CASE("balancing: within the dead band t holds, and a short imbalance does not move it") {
  threshold_controller c{balancing(), one_byte_per_token};
  const threshold_controller::link_signals idle{.capacity_bps = 1e9};
  // Both behind about as much (ratio < 1.5): t holds, whatever the time.
  for (int i = 0; i < 10; ++i)
    CHECK(c.update(t0 + std::chrono::seconds(i), false, idle, waits(20, 15)) == 16000);
  // PD behind by 1.9 s only (within the 2 s slack): holds too.
  CHECK(c.update(t0 + 20s, false, idle, waits(2.9, 1.0)) == 16000);
  CHECK(std::string{c.behind()}.empty());
  // An imbalance that flips sides before a retune interval passes moves nothing.
  for (int i = 0; i < 10; ++i) {
    const auto at = t0 + 30s + std::chrono::seconds(i);
    CHECK(c.update(at, false, idle, i % 2 ? waits(30, 1) : waits(1, 30)) == 16000);
  }
  CHECK(c.retunes() == 0);
}

TEST_CASE("balancing: both sides keeping up bring t back toward the plan") {
  threshold_controller c{balancing(), one_byte_per_token};
  const threshold_controller::link_signals idle{.capacity_bps = 1e9};
  c.update(t0, false, idle, waits(30, 1));
  c.update(t0 + 2s, false, idle, waits(30, 1));
  c.update(t0 + 4s, false, idle, waits(30, 1));
  REQUIRE(c.threshold() == 4000);
  // Queues drained: one doubling per retune interval up to the planned t, no further.
  std::vector<uint64_t> steps;
  for (int i = 3; i < 7; ++i)
    steps.push_back(c.update(t0 + std::chrono::seconds(2 * i), false, idle, waits(0.2, 0.1)));
  CHECK(steps == std::vector<uint64_t>{8000, 16000, 16000, 16000});
}

TEST_CASE("balancing: an unknown wait, or balance_ratio 0, leaves t to the link fit") {
  auto s = balancing(1000);
  threshold_controller c{s, one_byte_per_token};
  const threshold_controller::link_signals slow{
      .capacity_bps = 1e6, .throughput_bps = 80000, .backlog_bytes = 1};
  c.observe(t0, 10000);
  c.observe(t0, 4000);
  // The PrfaaS side's wait unknown (no worker has measured its pace): the link fit.
  CHECK(c.update(t0, true, slow, waits(30, -1)) == 4000);
  s.balance_ratio = 0;
  threshold_controller off{s, one_byte_per_token};
  off.observe(t0, 10000);
  off.observe(t0, 4000);
  CHECK(off.update(t0, true, slow, waits(30, 1)) == 4000);
  CHECK(std::string{off.behind()}.empty());
}

TEST_CASE("prfaas policy: an overloaded PD cluster beside an idle PrfaaS cluster lowers t") {
  // The trace case: most prompts are below t, the PD prefill workers queue, the PrfaaS
  // ones idle. Waits come from the workers' reports: pending tokens over measured pace.
  auto p = prfaas_policy(16000);
  auto v = two_sides();
  v.prefill[0].tokens_per_s = 20000; // PrfaaS: idle
  v.prefill[1].tokens_per_s = 5000;  // PD: 200000 tokens queued = 40 s
  v.prefill[1].queued_tokens = 200000;
  CHECK(v.prefill_drain_seconds(false) == Approx(40.0));
  CHECK(v.prefill_drain_seconds(true) == 0.0);
  std::vector<uint64_t> ts;
  for (int i = 0; i <= 8; i += 2) {
    v.now = t0 + std::chrono::seconds(i);
    ts.push_back(p->decide(prompt(10000), v).threshold);
  }
  // Default step 1.25, once the imbalance lasted the 2 s retune interval.
  CHECK(ts == std::vector<uint64_t>{16000, 12800, 10240, 8192, 6553});
  // At t = 6553 a 10000-token prompt is offloaded now.
  CHECK(p->decide(prompt(10000), v).route == "prfaas");
  // The link down: no offload, and t does not move while it is down.
  v.link_up = false;
  for (int i = 10; i <= 20; i += 2) {
    v.now = t0 + std::chrono::seconds(i);
    auto c = p->decide(prompt(10000), v);
    CHECK(c.route == "pd");
    CHECK(c.threshold == 6553);
  }
}

TEST_CASE("cluster view: a side's drain time counts workers without a pace at the side's mean") {
  auto v = two_sides();
  worker_view pd2{.addr = {"pd-1", "pdp"}, .cluster = "pd", .prfaas = false};
  v.prefill.push_back(pd2);
  v.prefill[1].queued_tokens = 30000;
  v.prefill[2].queued_tokens = 10000;
  // Work pending, no pace measured yet on that side: unknown.
  CHECK(v.prefill_drain_seconds(false) == -1);
  v.prefill[1].tokens_per_s = 1000;
  // 40000 tokens over two workers at 1000 tokens/s each (the second at the mean): 20 s.
  CHECK(v.prefill_drain_seconds(false) == Approx(20.0));
  v.prefill[2].up = false; // only routable workers count
  CHECK(v.prefill_drain_seconds(false) == Approx(30.0));
  v.prefill[1].up = false;
  CHECK(v.prefill_drain_seconds(false) == -1); // no routable worker on that side
}

TEST_CASE("entering scarce, t jumps to the link fit as far as the PD cluster's pace takes it") {
  // The live failure this guards: under a tbf cut both queues are known and the PrfaaS
  // side's wait (the link's backlog) is the longer, so balancing alone raised t a step
  // per retune interval while long prompts kept crossing the link.
  threshold_controller c{balancing(1000), one_byte_per_token};
  const threshold_controller::link_signals slow{
      .capacity_bps = 1e6, .throughput_bps = 80000, .backlog_bytes = 1};
  c.observe(t0, 10000);
  c.observe(t0, 4000);
  c.observe(t0, 500);
  c.update(t0, false, {.capacity_bps = 1e6}, waits(0.5, 20, 1e6));
  REQUIRE(std::string{c.behind()} == "prfaas");
  // The fit is 4000 (10000 fits 80000 bits/s in the 1 s span, 10000 + 4000 do not). A
  // PD pace of 1e6 tokens/s takes 500 + 4000 tokens in that second at once.
  CHECK(c.update(t0 + 1s, true, slow, waits(0.5, 20, 1e6)) == 4000);
  CHECK(std::string{c.last_reason()} == "link_fit");
  // Still behind a retune interval later: balancing raises t above it.
  CHECK(c.update(t0 + 3s, true, slow, waits(0.5, 20, 1e6)) == 8000);
  CHECK(std::string{c.last_reason()} == "prfaas_behind");
}

TEST_CASE(
    "the jump stops where the PD cluster's pace runs out, and an unknown pace makes no jump") {
  const threshold_controller::link_signals slow{
      .capacity_bps = 1e6, .throughput_bps = 80000, .backlog_bytes = 1};
  auto traffic = [](threshold_controller& c) {
    for (uint64_t l : {10000, 4000, 3000, 2000, 500})
      c.observe(t0, l);
  };
  // The fit is 4000 (only 10000 fits 80000 bits/s). 0.8 × 4375 tokens/s = 3500 tokens
  // in the 1 s span: 500 + 2000 fit, + 3000 does not: t = 2000, not 4000.
  threshold_controller part{balancing(1000), one_byte_per_token};
  traffic(part);
  CHECK(part.update(t0, true, slow, waits(1, 20, 4375)) == 2000);
  CHECK(std::string{part.last_reason()} == "link_fit");
  // No pace measured in the PD cluster yet: balancing alone moves t, from where it is.
  threshold_controller blind{balancing(1000), one_byte_per_token};
  traffic(blind);
  CHECK(blind.update(t0, true, slow, waits(1, 20)) == 1000);
  CHECK(blind.retunes() == 0); // a jump that cannot happen leaves no trace
  CHECK(blind.update(t0 + 2s, true, slow, waits(1, 20)) == 2000);
  CHECK(std::string{blind.last_reason()} == "prfaas_behind");
}

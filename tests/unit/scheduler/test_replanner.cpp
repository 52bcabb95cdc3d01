// Online re-planning (the long-term controller's planning half): the planner run on the
// observed window, its plan followed with hysteresis and a bounded rate, measured
// speeds scaling the profiles, and the moves it hands to the policy and the role
// controller. Expected plans are computed with the planner library directly on the
// same inputs, so a test checks the wiring (which lengths, which counts, which
// bandwidth), not the planner's arithmetic a second time.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "prfaas/planner/multi.hpp"
#include "prfaas/planner/planner.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "scheduler/replanner.hpp"
#include "scheduler/role_controller.hpp"
#include "scheduler/threshold_controller.hpp"
#include "replanner_fixture.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;
namespace pl = prfaas::planner;
using namespace prfaas::serving::replanner_test;

TEST_CASE("replanner: the plan is the planner's optimum on the window, and t walks there in "
          "bounded steps") {
  const auto ls = lengths(2000, 9.9, 1);
  const auto want = expected(ls);
  const auto plan_t = static_cast<uint64_t>(std::llround(want.threshold));
  REQUIRE(plan_t > 5000); // the paper's law offloads the long tail only
  replanner r{fast(), kimi(), 100};
  auto v = case_study();
  CHECK_FALSE(r.tick(t0, v, fixed_split)); // the first interval only gathers
  uint64_t t = 100;
  int moves = 0;
  for (int i = 1; i <= 8; ++i) {
    const auto now = t0 + 10s * i;
    feed(r, ls, now, t);
    auto d = r.tick(now, v, fixed_split);
    REQUIRE(d);
    CHECK(d->t_plan == plan_t);
    CHECK(d->lambda_plan == Approx(want.lambda));
    CHECK(d->binding == pl::to_string(want.binding));
    CHECK(d->t_before == t);
    // Bounded: never more than a factor 4 per re-plan, never past the plan.
    CHECK(static_cast<double>(d->t_after) <= 4.0 * static_cast<double>(t) + 1);
    CHECK(d->t_after <= plan_t);
    if (d->t_after != t)
      ++moves;
    t = d->t_after;
    CHECK(r.planned() == t);
  }
  CHECK(t == plan_t); // arrived, exactly
  // 100 -> plan in factors of 4: ceil(log4(plan/100)) moves, then held.
  CHECK(moves ==
        static_cast<int>(std::ceil(std::log(static_cast<double>(plan_t) / 100.0) / std::log(4.0))));
}

TEST_CASE("replanner: hysteresis holds a planned t near the plan, a far one moves") {
  const auto ls = lengths(2000, 9.9, 2);
  const auto plan_t = static_cast<uint64_t>(std::llround(expected(ls).threshold));
  auto v = case_study();
  for (double off : {0.95, 1.08}) { // within 10%: held
    replanner r{fast(), kimi(), static_cast<uint64_t>(static_cast<double>(plan_t) * off)};
    r.tick(t0, v, fixed_split);
    feed(r, ls, t0 + 10s, plan_t);
    auto d = r.tick(t0 + 10s, v, fixed_split);
    REQUIRE(d);
    CHECK(std::string(d->reason) == "held");
    CHECK(d->t_after == d->t_before);
  }
  replanner r{fast(), kimi(), plan_t * 2}; // 100% off: moves, straight onto the plan
  r.tick(t0, v, fixed_split);
  feed(r, ls, t0 + 10s, plan_t);
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(std::string(d->reason) == "moved");
  CHECK(d->t_after == plan_t);
}

TEST_CASE("replanner: holds without enough samples, with the link down, without workers") {
  auto v = case_study();
  replanner r{fast(), kimi(), 4096};
  r.tick(t0, v, fixed_split);
  feed(r, lengths(10, 9.9, 3), t0 + 10s, 4096);
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(std::string(d->reason) == "few_samples");
  CHECK(d->t_after == 4096);

  feed(r, lengths(500, 9.9, 4), t0 + 20s, 4096);
  v.link_up = false;
  d = r.tick(t0 + 20s, v, fixed_split);
  REQUIRE(d);
  CHECK(std::string(d->reason) == "no_link");
  CHECK(r.planned() == 4096);

  v = case_study();
  for (auto& w : v.prefill)
    if (w.prfaas)
      w.up = false;
  feed(r, lengths(500, 9.9, 5), t0 + 30s, 4096);
  d = r.tick(t0 + 30s, v, fixed_split);
  REQUIRE(d);
  CHECK(std::string(d->reason) == "no_workers");
  CHECK(r.planned() == 4096);
}

namespace {

/// The case study's PD cluster with links to two PrfaaS clusters of 2 workers each,
/// east behind 100 Gbit/s and west behind 10 Gbit/s (as their monitors report them).
cluster_view two_links() {
  cluster_view v;
  for (const char* c : {"east", "west"})
    for (int i = 0; i < 2; ++i)
      v.prefill.push_back(
          {.addr = {std::string(c) + std::to_string(i), "pf"}, .cluster = c, .prfaas = true});
  for (int i = 0; i < 3; ++i)
    v.prefill.push_back({.addr = {"pdp" + std::to_string(i), "pf"}, .cluster = "pd"});
  for (int i = 0; i < 5; ++i)
    v.decode.push_back({.addr = {"dec" + std::to_string(i), "dec"}, .cluster = "pd"});
  v.links = {{.cluster = "east", .capacity_bps = 100e9}, {.cluster = "west", .capacity_bps = 10e9}};
  v.link_capacity_bps = 110e9;
  return v;
}

/// The LP the replanner should build for `ls` on two_links(): each PrfaaS cluster's
/// workers at `shares` of their time (this PD cluster's part of them), the links as
/// given (a link of 0 is left out, as a link that is down).
pl::multi_model lp_of(const std::vector<uint64_t>& ls, double east_gbps, double west_gbps,
                      double east_share = 1, double west_share = 1) {
  auto p = kimi();
  pl::multi_inputs in;
  in.lengths = pl::length_distribution::empirical(ls);
  in.output_tokens = 1024;
  in.slo_tokens_per_s = p.pd.decode->slo_tokens_per_s;
  in.threshold_points = 128;
  in.refine_rounds = 2;
  in.pd.push_back({"pd", {p.pd, 8}, 1});
  const std::pair<double, double> east{east_gbps, east_share}, west{west_gbps, west_share};
  for (auto [gbps, share] : {east, west}) {
    if (gbps <= 0)
      continue;
    auto prof = p.prfaas;
    for (auto& pt : prof.points)
      pt.prefill_s /= share;
    in.prfaas.push_back({"c" + std::to_string(in.prfaas.size()), {prof, 2}});
    in.links.push_back({in.prfaas.size() - 1, 0, gbps});
  }
  return pl::multi_model{in};
}

} // namespace

TEST_CASE("replanner: with links to two PrfaaS clusters it plans with the M x N model, each "
          "link at its bandwidth, each cluster at this PD cluster's share of it") {
  const auto ls = lengths(2000, 9.9, 21);
  auto check_plan = [&](const cluster_view& v, replanner::settings s, const pl::multi_model& m) {
    replanner r{s, kimi(), 100};
    r.tick(t0, v, fixed_split);
    feed(r, ls, t0 + 10s, 100);
    auto d = r.tick(t0 + 10s, v, fixed_split);
    REQUIRE(d);
    const auto want = pl::best_threshold(m, 3, 5);
    INFO("plan t " << d->t_plan << " lambda " << d->lambda_plan << "; LP t "
                   << want.choice[0].threshold << " lambda " << want.lambda);
    CHECK(d->t_plan == static_cast<uint64_t>(std::llround(want.choice[0].threshold)));
    CHECK(d->lambda_plan == Approx(want.lambda));
    CHECK(d->lambda_now == Approx(m.evaluate({{100, 3, 5}}).lambda));
    // Named as Eq. 6's terms: the LP's binding rows at the plan.
    const bool link_binds =
        std::any_of(want.links.begin(), want.links.end(), [](const auto& l) { return l.binding; });
    if (want.pd[0].decode_binding)
      CHECK(d->binding == "pd_decode");
    else if (want.pd[0].prefill_binding)
      CHECK(d->binding == "pd_prefill");
    else if (link_binds)
      CHECK(d->binding == "link");
    return *d;
  };
  auto v = two_links();
  const auto both = check_plan(v, fast(), lp_of(ls, 100, 10));
  CHECK(both.usable_gbps == Approx(110));

  // west's link down: east alone. The plan predicts less.
  v.links[1].up = false;
  const auto east_only = check_plan(v, fast(), lp_of(ls, 100, 0));
  CHECK(east_only.lambda_plan < both.lambda_plan);
  CHECK(east_only.usable_gbps == Approx(100));

  // Both up, east shared with another PD cluster of the same weight: half of east's workers.
  v = two_links();
  auto s = fast();
  s.links["east"] = {.rate_bps = 100e9, .share = 0.5};
  const auto shared = check_plan(v, s, lp_of(ls, 100, 10, 0.5, 1));
  CHECK(shared.lambda_plan < both.lambda_plan);

  // No link up: nothing to plan with.
  v = two_links();
  for (auto& l : v.links)
    l.up = false;
  replanner r{fast(), kimi(), 100};
  r.tick(t0, v, fixed_split);
  feed(r, ls, t0 + 10s, 100);
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(std::string(d->reason) == "no_link");
  CHECK(r.planned() == 100);
}

/// Every routable worker of a side reports `prompts` prefills of `tokens` each, taking
/// `times` the profile's seconds.
void report_prefills(cluster_view& v, bool prfaas_side, const prfaas::engine::profile& prof,
                     const std::vector<uint32_t>& prompts, double times) {
  for (auto& w : v.prefill)
    if (w.prfaas == prfaas_side) {
      w.recent_prefills.clear();
      for (uint32_t n : prompts)
        w.recent_prefills.emplace_back(n, prof.prefill_seconds(n) * times);
    }
}

TEST_CASE("replanner: a PD cluster slower than its profile scales the PD times and lowers t") {
  const auto ls = lengths(2000, 9.9, 6);
  auto v = case_study();
  const uint64_t t_route = 20000;
  replanner r{fast(), kimi(), t_route};
  r.tick(t0, v, fixed_split);
  feed(r, ls, t0 + 10s, t_route);
  CHECK(r.scale(false, v) == 1.0); // nothing reported yet: the profile as it is
  // The PD workers took twice their profile's time for the prompts they ran.
  report_prefills(v, false, kimi().pd, {3000, 12000, 800}, 2.0);
  CHECK(r.scale(false, v) == Approx(2.0));
  CHECK(r.scale(true, v) == 1.0);
  // A worker that takes no work (standby, draining, down) does not count.
  for (auto& w : v.prefill)
    if (!w.prfaas) {
      w.enabled = false;
      break;
    }
  CHECK(r.scale(false, v) == Approx(2.0));
  for (auto& w : v.prefill)
    w.enabled = true;
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(d->pd_scale == Approx(2.0));
  CHECK(d->prfaas_scale == 1.0);
  const auto slow = expected(ls, 100, 2.0);
  CHECK(d->t_plan == static_cast<uint64_t>(std::llround(slow.threshold)));
  CHECK(d->t_plan < static_cast<uint64_t>(std::llround(expected(ls).threshold)));
}

TEST_CASE("replanner: workers at their profile's speed are at scale 1 whatever lengths they ran") {
  // A prefill has a fixed cost, so a rate (tokens/s) grows with the length: compared with
  // the profile's rate of other prompts (the window's, or older long ones), a worker at
  // its profile on short prompts looked several times slower. The time of the same
  // prompts under the profile cannot mislead that way.
  const auto p = kimi();
  REQUIRE(20000 / p.pd.prefill_seconds(20000) > 3 * (300 / p.pd.prefill_seconds(300)));
  replanner r{fast(), kimi(), 1u << 20}; // every prompt stays on the PD side
  feed(r, std::vector<uint64_t>(100, 20000), t0, 1u << 20);
  feed(r, std::vector<uint64_t>(200, 300), t0 + 10s, 1u << 20);
  auto v = case_study();
  for (const std::vector<uint32_t>& ran :
       {std::vector<uint32_t>{300, 300, 300}, std::vector<uint32_t>{20000, 300, 64, 90000}}) {
    INFO(ran.size() << " prefills, the first of " << ran[0] << " tokens");
    report_prefills(v, false, p.pd, ran, 1.0);
    CHECK(r.scale(false, v) == Approx(1.0));
    report_prefills(v, false, p.pd, ran, 0.5); // twice as fast
    CHECK(r.scale(false, v) == Approx(0.5));
  }
  // The PrfaaS side against its own profile, not the PD one.
  report_prefills(v, true, p.prfaas, {5000, 40000}, 1.5);
  CHECK(r.scale(true, v) == Approx(1.5));
}

TEST_CASE("replanner: a backed-up link plans with what it delivers, not its rate") {
  const auto ls = lengths(2000, 9.9, 7);
  auto v = case_study();
  v.link_throughput_bps = 5e9;
  v.link_queue_seconds = 3; // backed up: 5 Gbit/s is what it delivers
  replanner r{fast(), kimi(), 20000};
  r.tick(t0, v, fixed_split);
  feed(r, ls, t0 + 10s, 20000);
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(d->usable_gbps == Approx(5.0));
  const auto want = expected(ls, 5.0);
  CHECK(d->t_plan == static_cast<uint64_t>(std::llround(want.threshold)));
  CHECK(d->t_plan > static_cast<uint64_t>(std::llround(expected(ls).threshold)));
}

TEST_CASE("replanner: after the lengths shift, t is within 20% of the new plan in 5 re-plans") {
  const auto long_ls = lengths(1000, 9.9, 9);
  const auto short_ls = lengths(1000, 7.0, 10);
  const auto plan_long = static_cast<uint64_t>(std::llround(expected(long_ls).threshold));
  const auto plan_short = static_cast<uint64_t>(std::llround(expected(short_ls).threshold));
  REQUIRE(std::abs(std::log(static_cast<double>(plan_long) / static_cast<double>(plan_short))) >
          std::log(1.5));
  auto s = fast();
  s.window = 30s; // the default: two re-plans still see some of the old lengths
  auto v = case_study();
  replanner r{s, kimi(), plan_long};
  r.tick(t0, v, fixed_split);
  feed(r, long_ls, t0 + 10s, plan_long);
  REQUIRE(r.tick(t0 + 10s, v, fixed_split));
  CHECK(r.planned() == plan_long);
  // From t0 + 10 s only short prompts arrive.
  for (int i = 2; i <= 6; ++i) {
    feed(r, short_ls, t0 + 10s * i, r.planned());
    REQUIRE(r.tick(t0 + 10s * i, v, fixed_split));
  }
  INFO("planned " << r.planned() << ", plan for the short law " << plan_short);
  CHECK(std::abs(std::log(static_cast<double>(r.planned()) / static_cast<double>(plan_short))) <=
        std::log(1.2));
}

TEST_CASE("threshold controller: a re-plan moves the planned t and t by the same factor") {
  threshold_controller::settings s;
  s.planned = 1000;
  s.max = 100000;
  threshold_controller c{s, [](uint64_t l) { return static_cast<double>(l); }};
  c.replan(t0, 4000);
  CHECK(c.threshold() == 4000);
  CHECK(c.config().planned == 4000);
  CHECK(std::string(c.last_reason()) == "replan");
  c.replan(t0 + 1s, 1000000); // beyond max: clamped
  CHECK(c.threshold() == 100000);
  CHECK(c.config().planned == 100000);
}

TEST_CASE("replanner: a shift of the lengths restarts the window, steady lengths do not") {
  auto s = fast();
  s.window = 120s;
  auto v = case_study();
  replanner r{s, kimi(), 19400};
  r.tick(t0, v, fixed_split);
  // 60 s of the paper's law, re-planned every 10 s: one law, no restart.
  for (int i = 1; i <= 6; ++i) {
    feed(r, lengths(25, 9.9, 100 + i), t0 + 10s * i, r.planned());
    auto d = r.tick(t0 + 10s * i, v, fixed_split);
    REQUIRE(d);
    CHECK_FALSE(d->window_restarted);
    CHECK(d->samples == 25u * static_cast<size_t>(i));
  }
  // Then 10 s of prompts e^2 times shorter: the older 150 samples go.
  feed(r, lengths(25, 7.9, 200), t0 + 70s, r.planned());
  auto d = r.tick(t0 + 70s, v, fixed_split);
  REQUIRE(d);
  CHECK(d->window_restarted);
  CHECK(d->samples == 25);
  // Off: the same shift keeps the whole window.
  s.shift_z = 0;
  replanner off{s, kimi(), 19400};
  off.tick(t0, v, fixed_split);
  for (int i = 1; i <= 6; ++i) {
    feed(off, lengths(25, 9.9, 100 + i), t0 + 10s * i, off.planned());
    off.tick(t0 + 10s * i, v, fixed_split);
  }
  feed(off, lengths(25, 7.9, 200), t0 + 70s, off.planned());
  d = off.tick(t0 + 70s, v, fixed_split);
  REQUIRE(d);
  CHECK_FALSE(d->window_restarted);
  CHECK(d->samples == 175);
}

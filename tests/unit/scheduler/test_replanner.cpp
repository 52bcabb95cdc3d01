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

using namespace prfaas::serving;
using namespace std::chrono_literals;
namespace pl = prfaas::planner;

namespace {

prfaas::engine::profile load(const std::string& name) {
  auto p = prfaas::engine::load_profile(std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/" +
                                        name + ".yaml");
  REQUIRE(p);
  return p.value();
}

replanner::profiles kimi() {
  return {load("kimi-linear-1t-h200"), load("kimi-linear-1t-h20")};
}

/// The case study's shape: 4 PrfaaS prefill workers, 3 PD prefill, 5 decode, a
/// 100 Gbit/s link, no pace measured yet (profiles as they are).
cluster_view case_study() {
  cluster_view v;
  for (int i = 0; i < 4; ++i)
    v.prefill.push_back({.addr = {"prfaas", "pf" + std::to_string(i)}, .prfaas = true});
  for (int i = 0; i < 3; ++i)
    v.prefill.push_back({.addr = {"pdp" + std::to_string(i), "pf"}, .cluster = "pd"});
  for (int i = 0; i < 5; ++i)
    v.decode.push_back({.addr = {"dec" + std::to_string(i), "dec"}, .cluster = "pd"});
  v.link_capacity_bps = 100e9;
  return v;
}

const replanner::pd_instances fixed_split{
    .prefill = 3, .decode = 5, .min_prefill = 3, .max_prefill = 3};

/// Log-normal lengths (seeded): the paper's law, or a shorter one.
std::vector<uint64_t> lengths(size_t n, double mu, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::lognormal_distribution<double> d{mu, 1.0};
  std::vector<uint64_t> out;
  while (out.size() < n) {
    const double l = d(rng);
    if (l >= 128 && l <= 131072)
      out.push_back(static_cast<uint64_t>(l));
  }
  return out;
}

/// Re-plans every 10 s over the last 10 s: each re-plan sees exactly the batch fed
/// before it (a window holding several copies of one batch is the same law, but its
/// sums would differ in the last bits, and so could the argmax of a flat optimum).
replanner::settings fast() {
  replanner::settings s;
  s.interval = 10s;
  s.window = 10s;
  s.min_samples = 32;
  return s;
}

const replanner::time_point t0{std::chrono::seconds(1000)};

/// Feeds `ls` spread over the 10 s before `at`, routed by `t` (l > t offloaded).
void feed(replanner& r, const std::vector<uint64_t>& ls, replanner::time_point at, uint64_t t,
          uint32_t output = 1024) {
  const auto gap = std::chrono::nanoseconds{10s} / static_cast<int64_t>(ls.size());
  for (size_t i = 0; i < ls.size(); ++i)
    r.observe(at - 10s + gap * static_cast<int64_t>(i), ls[i], ls[i] > t, output);
}

/// The model the replanner builds from these lengths: the case study's 4 PrfaaS
/// instances, `pd` PD instances, a link of `link_gbps`, PD prefill `pd_slowdown` times
/// slower than profiled, 1,024 output tokens, the replanner's search grid.
pl::throughput_model model_of(const std::vector<uint64_t>& ls, uint32_t pd = 8,
                              double link_gbps = 100, double pd_slowdown = 1) {
  auto p = kimi();
  for (auto& pt : p.pd.points)
    pt.prefill_s *= pd_slowdown;
  pl::case_inputs in;
  in.prfaas = {p.prfaas, 4};
  in.pd = {p.pd, pd};
  in.link_gbps = link_gbps;
  in.lengths = pl::length_distribution::empirical(ls);
  in.output_tokens = 1024;
  in.slo_tokens_per_s = p.pd.decode->slo_tokens_per_s;
  in.threshold_points = 128;
  in.refine_rounds = 2;
  return pl::throughput_model{in};
}

/// What the planner says for these lengths on the case study at a fixed split.
pl::operating_point expected(const std::vector<uint64_t>& ls, double link_gbps = 100,
                             double pd_slowdown = 1) {
  return pl::best_threshold(model_of(ls, 8, link_gbps, pd_slowdown), 4, 3, 5);
}

} // namespace

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

TEST_CASE("replanner: a PD cluster slower than its profile scales the PD times and lowers t") {
  const auto ls = lengths(2000, 9.9, 6);
  auto v = case_study();
  // The PD workers report half the pace their profile gives for the lengths they ran.
  const uint64_t t_route = 20000;
  replanner r{fast(), kimi(), t_route};
  r.tick(t0, v, fixed_split);
  feed(r, ls, t0 + 10s, t_route);
  size_t pd_workers = 0;
  for (auto& w : v.prefill)
    pd_workers += w.prfaas ? 0 : 1;
  // The pace the profile gives for these lengths: the one whose scale is 1.
  const double pace = r.scale(false, 1.0, pd_workers);
  REQUIRE(pace > 0);
  for (auto& w : v.prefill)
    if (!w.prfaas)
      w.tokens_per_s = pace / 2;
  CHECK(r.scale(false, pace, pd_workers) == Approx(1.0));
  CHECK(r.scale(false, pace / 2, pd_workers) == Approx(2.0));
  CHECK(r.scale(true, 0) == 1.0); // no pace measured: the profile as it is
  auto d = r.tick(t0 + 10s, v, fixed_split);
  REQUIRE(d);
  CHECK(d->pd_scale == Approx(2.0));
  const auto slow = expected(ls, 100, 2.0);
  CHECK(d->t_plan == static_cast<uint64_t>(std::llround(slow.threshold)));
  CHECK(d->t_plan < static_cast<uint64_t>(std::llround(expected(ls).threshold)));
}

TEST_CASE("replanner: workers at their profile's pace on short prompts are not called slow") {
  // The window still holds older, long prompts; the workers' pace reflects their last
  // prefills, short ones, whose fixed cost makes them run at a far lower rate.
  const auto p = kimi();
  const double long_rate = 20000 / p.pd.prefill_seconds(20000);
  const double short_rate = 300 / p.pd.prefill_seconds(300);
  REQUIRE(long_rate > short_rate * 3);
  for (size_t workers : {size_t{1}, size_t{4}}) {
    INFO(workers << " PD prefill workers");
    replanner r{fast(), kimi(), 1u << 20}; // every prompt stays on the PD side
    feed(r, std::vector<uint64_t>(100, 20000), t0, 1u << 20);
    feed(r, std::vector<uint64_t>(200, 300), t0 + 10s, 1u << 20);
    // Running exactly at the profile, each reports the rate of its 300-token prefills.
    CHECK(r.scale(false, short_rate, workers) == Approx(1.0).epsilon(0.01));
    // Twice as slow as the profile.
    CHECK(r.scale(false, short_rate / 2, workers) == Approx(2.0).epsilon(0.01));
  }
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

namespace {

/// Short prompts on the case study with 3 of its 8 PD instances prefilling and 4
/// convertible: the PrfaaS cluster has little to do and decode binds, so the plan wants
/// fewer PD prefill instances than 3.
struct short_prompts {
  std::vector<uint64_t> ls = lengths(2000, 7.5, 8);
  cluster_view v = case_study();
  replanner::pd_instances convertible{
      .prefill = 3, .decode = 5, .min_prefill = 1, .max_prefill = 5};
  pl::throughput_model m = model_of(ls);
  pl::operating_point best = pl::best_split(m, 4, 8, 1, 5);
  pl::operating_point here = pl::best_threshold(m, 4, 3, 5);
};

} // namespace

TEST_CASE("replanner: with convertible nodes the split follows the plan when it gains enough") {
  const short_prompts c;
  const auto& [ls, v, convertible, m, best, here] = c;
  REQUIRE(best.n_p != 3);
  REQUIRE(best.lambda > here.lambda * 1.1); // above the default split_gain

  replanner r{fast(), kimi(), 4096};
  CHECK_FALSE(r.target_prefill());
  r.tick(t0, v, convertible);
  feed(r, ls, t0 + 10s, 4096);
  auto d = r.tick(t0 + 10s, v, convertible);
  REQUIRE(d);
  CHECK(d->prefill_before == 3);
  CHECK(d->prefill_after == best.n_p);
  CHECK(r.target_prefill() == best.n_p);
  CHECK(d->lambda_plan == Approx(best.lambda));
}

TEST_CASE("replanner: a smaller split gain wanted by consecutive re-plans moves the split") {
  const short_prompts c;
  const auto& [ls, v, convertible, m, best, here] = c;
  REQUIRE(best.n_p != 3);
  // A bar the gain cannot clear at once (patience 0: the split stays); the gain is
  // still well above t_gain.
  auto s = fast();
  s.split_gain = best.lambda / here.lambda;
  REQUIRE(best.lambda > here.lambda * (1 + s.t_gain));
  for (uint32_t patience : {0u, 3u}) {
    INFO("patience " << patience);
    s.split_patience = patience;
    replanner r{s, kimi(), 4096};
    r.tick(t0, v, convertible);
    std::vector<uint32_t> targets;
    for (int i = 1; i <= 5; ++i) {
      feed(r, ls, t0 + 10s * i, r.planned());
      auto d = r.tick(t0 + 10s * i, v, convertible);
      REQUIRE(d);
      targets.push_back(d->prefill_after);
    }
    if (patience == 0)
      CHECK(targets == std::vector<uint32_t>(5, 3));
    else
      CHECK(targets == std::vector<uint32_t>{3, 3, best.n_p, best.n_p, best.n_p});
  }
}

TEST_CASE(
    "replanner: a split going back soon after a change waits for patience, a shift excepted") {
  const short_prompts c;
  const auto& [ls, v, convertible, m, best, here] = c;
  REQUIRE(best.n_p < 3);
  // Long prompts want more PD prefill again, by far more than split_gain over the split
  // the short ones committed to: without the hold, the first re-plan on them moves it.
  const auto long_ls = lengths(2000, 9.9, 9);
  const auto long_model = model_of(long_ls);
  const auto long_best = pl::best_split(long_model, 4, 8, 1, 5);
  const auto long_here = pl::best_threshold(long_model, 4, best.n_p, 8 - best.n_p);
  REQUIRE(long_best.n_p > best.n_p);
  REQUIRE(long_best.lambda > long_here.lambda * 1.1);

  // Re-plans at t0 + 10 s (short prompts), then at t0 + `from` and every 10 s after it
  // (long prompts, four of them): the target split after each.
  auto run = [&](replanner::settings s, std::chrono::seconds from) {
    replanner r{s, kimi(), 4096};
    r.tick(t0, v, convertible);
    feed(r, ls, t0 + 10s, 4096);
    auto first = r.tick(t0 + 10s, v, convertible);
    REQUIRE(first);
    REQUIRE(first->prefill_after == best.n_p);
    std::vector<uint32_t> targets;
    for (int i = 0; i < 4; ++i) {
      const auto at = t0 + from + 10s * i;
      feed(r, long_ls, at, r.planned());
      auto d = r.tick(at, v, convertible);
      REQUIRE(d);
      targets.push_back(d->prefill_after);
    }
    return targets;
  };
  auto s = fast();
  s.shift_z = 0;
  s.split_reverse_hold = 60s;
  const auto n = best.n_p, l = long_best.n_p;
  SECTION("within the hold: three re-plans in a row") {
    CHECK(run(s, 20s) == std::vector<uint32_t>{n, n, l, l});
  }
  SECTION("no hold: at once") {
    s.split_reverse_hold = 0s;
    CHECK(run(s, 20s) == std::vector<uint32_t>{l, l, l, l});
  }
  SECTION("after the hold: at once") {
    CHECK(run(s, 80s) == std::vector<uint32_t>{l, l, l, l});
  }
  SECTION("the lengths shifted since the change: at once") {
    s.window = 120s;
    s.shift_z = 4;
    replanner r{s, kimi(), 4096};
    r.tick(t0, v, convertible);
    feed(r, ls, t0 + 10s, 4096);
    auto first = r.tick(t0 + 10s, v, convertible);
    REQUIRE(first);
    REQUIRE(first->prefill_after == n);
    feed(r, long_ls, t0 + 20s, r.planned());
    auto d = r.tick(t0 + 20s, v, convertible);
    REQUIRE(d);
    CHECK(d->window_restarted);
    CHECK(d->prefill_after == l);
  }
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

TEST_CASE("role controller: with a target split it converts toward it, loads aside") {
  cluster_view v;
  auto pd = [](const std::string& node, const std::string& actor, bool enabled) {
    worker_view w{.addr = {node, actor}, .cluster = "pd"};
    w.enabled = enabled;
    w.capacity = 10;
    return w;
  };
  v.prefill = {pd("a", "pf", true), pd("b", "pf", false), pd("c", "pf", false)};
  v.decode = {pd("b", "dec", true), pd("c", "dec", true), pd("d", "dec", true)};
  role_controller::settings s;
  s.interval = 1s;
  s.cooldown = 5s;
  s.smoothing = 1;
  role_controller rc{s, v};
  CHECK(rc.prefill_range(v) == std::pair<uint32_t, uint32_t>{1, 3});
  // Idle everywhere: the load rule would do nothing; the target asks for 2 prefill.
  rc.set_target(2);
  auto e = rc.tick(t0, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].to == "prefill");
  CHECK(e[0].phase == "draining");
  const auto& node = e[0].node;
  for (auto& w : v.decode)
    if (w.addr.node == node)
      ++w.reports; // a fresh report: empty
  e = rc.tick(t0 + 1s, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].phase == "converted");
  CHECK(role_controller::pd_roles(v) == std::pair<uint32_t, uint32_t>{2, 2});
  // At the target: nothing more, however long.
  CHECK(rc.tick(t0 + 60s, v).empty());
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

TEST_CASE("replanner: a conversion under way is not called back by the next re-plan") {
  // Short prompts: the plan wants 1 PD prefill instance (see the split test above).
  const auto ls = lengths(2000, 7.5, 8);
  auto v = case_study();
  auto s = fast();
  s.split_gain = 0.25; // 3 -> 1 predicts 33% more (the split test above): still worth it
  replanner r{s, kimi(), 4096};
  r.tick(t0, v, {.prefill = 3, .decode = 5, .min_prefill = 1, .max_prefill = 5});
  feed(r, ls, t0 + 10s, 4096);
  REQUIRE(r.tick(t0 + 10s, v, {.prefill = 3, .decode = 5, .min_prefill = 1, .max_prefill = 5}));
  const auto target = r.target_prefill();
  REQUIRE(target);
  REQUIRE(*target < 3);
  // A node is draining (neither role takes work): 2 prefill, 5 decode for the moment.
  // Against that split the committed one gains less than split_gain: judged from the
  // split of the moment, the re-plan would call the conversion back.
  {
    const auto m = model_of(ls, 7);
    const auto now = pl::best_threshold(m, 4, 2, 5);
    const auto committed = pl::best_threshold(m, 4, *target, 7 - *target);
    INFO("lambda at 2/5 " << now.lambda << ", at the committed split " << committed.lambda);
    REQUIRE(committed.lambda <= now.lambda * 1.25);
  }
  feed(r, ls, t0 + 20s, r.planned());
  auto d = r.tick(t0 + 20s, v, {.prefill = 2, .decode = 5, .min_prefill = 1, .max_prefill = 4});
  REQUIRE(d);
  CHECK(d->prefill_before == *target);
  CHECK(d->prefill_after == *target);
  CHECK(r.target_prefill() == target);
}

TEST_CASE("replan_interval without profile timings is a configuration error naming it") {
  const auto r = prfaas::actor_registry::with_builtins();
  const std::string base = std::string(PRFAAS_SOURCE_DIR) + "/configs/sim/replan-shift.yaml";
  CHECK_NOTHROW(r.validate(prfaas::load_deployment(base)));
  // The same deployment on the reference engine: no profile says how fast anything is.
  auto dep = prfaas::load_deployment(base);
  dep.model = YAML::Load("{ engine: reference, block_tokens: 16, max_context: 4096 }");
  for (auto& n : dep.nodes)
    for (auto& a : n.actors)
      if (a.params["profile"])
        a.params.remove("profile");
  try {
    r.validate(dep);
    FAIL("accepted");
  } catch (const prfaas::config_error& e) {
    CHECK(e.path() == "nodes[0].actors[1].replan_interval");
    CHECK_THAT(e.what(), Catch::Matchers::Contains("needs the PrfaaS prefill workers' profile"));
  }
}

TEST_CASE("the long-term controller's keys out of range are configuration errors naming them") {
  const auto r = prfaas::actor_registry::with_builtins();
  const std::string base = std::string(PRFAAS_SOURCE_DIR) + "/configs/sim/replan-shift.yaml";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"replan_split_reverse_hold", "-1s"}, {"replan_split_patience", "-1"},
      {"replan_shift_z", "-0.5"},           {"replan_max_step", "1"},
      {"replan_hysteresis", "1"},           {"convert_parallel", "0"}};
  for (const auto& [key, value] : bad) {
    INFO(key << ": " << value);
    auto dep = prfaas::load_deployment(base);
    REQUIRE(dep.nodes[0].actors[1].params["policy"]); // the scheduler
    dep.nodes[0].actors[1].params[key] = YAML::Load(value);
    try {
      r.validate(dep);
      FAIL("accepted");
    } catch (const prfaas::config_error& e) {
      CHECK(e.path() == "nodes[0].actors[1]." + key);
    }
  }
}

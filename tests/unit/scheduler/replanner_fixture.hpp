#pragma once

// What the re-planner's tests share: the case study's cluster and profiles, seeded
// log-normal lengths, a fast re-plan schedule, and the planner's expected plans on the
// same inputs (test_replanner.cpp: t and the window; test_replanner_split.cpp: the P/D
// split, conversions and the controller's keys).

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "prfaas/planner/planner.hpp"
#include "scheduler/replanner.hpp"

namespace prfaas::serving::replanner_test {

namespace pl = prfaas::planner;
using namespace std::chrono_literals;

inline prfaas::engine::profile load(const std::string& name) {
  auto p = prfaas::engine::load_profile(std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/" +
                                        name + ".yaml");
  REQUIRE(p);
  return p.value();
}

inline replanner::profiles kimi() {
  return {load("kimi-linear-1t-h200"), load("kimi-linear-1t-h20")};
}

/// The case study's shape: 4 PrfaaS prefill workers, 3 PD prefill, 5 decode, a
/// 100 Gbit/s link, no pace measured yet (profiles as they are).
inline cluster_view case_study() {
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

inline const replanner::pd_instances fixed_split{
    .prefill = 3, .decode = 5, .min_prefill = 3, .max_prefill = 3};

/// Log-normal lengths (seeded): the paper's law, or a shorter one.
inline std::vector<uint64_t> lengths(size_t n, double mu, uint64_t seed) {
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
inline replanner::settings fast() {
  replanner::settings s;
  s.interval = 10s;
  s.window = 10s;
  s.min_samples = 32;
  return s;
}

inline const replanner::time_point t0{std::chrono::seconds(1000)};

/// Feeds `ls` spread over the 10 s before `at`. (`t`, the threshold they were routed by,
/// is the caller's record: the re-planner keeps lengths, not where they went.)
inline void feed(replanner& r, const std::vector<uint64_t>& ls, replanner::time_point at,
                 uint64_t t, uint32_t output = 1024) {
  const auto gap = std::chrono::nanoseconds{10s} / static_cast<int64_t>(ls.size());
  for (size_t i = 0; i < ls.size(); ++i)
    r.observe(at - 10s + gap * static_cast<int64_t>(i), ls[i], output);
}

/// The model the replanner builds from these lengths: the case study's 4 PrfaaS
/// instances, `pd` PD instances, a link of `link_gbps`, PD prefill `pd_slowdown` times
/// slower than profiled, 1,024 output tokens, the replanner's search grid.
inline pl::throughput_model model_of(const std::vector<uint64_t>& ls, uint32_t pd = 8,
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
inline pl::operating_point expected(const std::vector<uint64_t>& ls, double link_gbps = 100,
                                    double pd_slowdown = 1) {
  return pl::best_threshold(model_of(ls, 8, link_gbps, pd_slowdown), 4, 3, 5);
}

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

} // namespace prfaas::serving::replanner_test

// Properties of the model and the search that hold whatever the calibration.

#include "planner_fixture.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace prfaas::planner;
using prfaas::planner::test::paper;

namespace {

case_inputs with_bandwidth(double gbps) {
  auto in = paper().cfg.inputs;
  in.link_gbps = gbps;
  return in;
}

} // namespace

TEST_CASE("decode: BS_max and per-instance throughput from the H20 decode model",
          "[planner][model]") {
  const auto& m = paper().model;
  CHECK(m.bs_max() == 20);
  CHECK(m.decode_step_s() <= 1.0 / 40 + 1e-12);
  CHECK(m.decode_rate_per_instance() == Approx(20 / (m.decode_step_s() * 1024)));
}

TEST_CASE("beyond the optimum, a higher threshold never raises Lambda", "[planner][model]") {
  const auto& c = paper();
  const auto& best = c.report.prfaas_pd.op;
  double last = best.lambda;
  double last_p = best.p;
  for (double t = best.threshold; t <= 131072; t *= 1.02) {
    const auto op = c.model.evaluate(t, best.n_prfaas, best.n_p, best.n_d);
    REQUIRE(op.lambda <= last + 1e-12);
    REQUIRE(op.p <= last_p);
    last = op.lambda;
    last_p = op.p;
  }
  // And below it, Lambda is no higher either (the optimum is a maximum over t).
  for (double t = 256; t < best.threshold; t *= 1.05)
    REQUIRE(c.model.evaluate(t, best.n_prfaas, best.n_p, best.n_d).lambda <= best.lambda + 1e-9);
}

TEST_CASE("the optimum balances the two prefill paths (Eq. 7)", "[planner][model]") {
  const auto& op = paper().report.prfaas_pd.op;
  const double prfaas = op.theta_prfaas / op.p, pd_p = op.theta_pd_p / (1 - op.p);
  CHECK(prfaas == Approx(pd_p).epsilon(0.01));
  // Decode has headroom at the paper's split, so Eq. 8 holds as an inequality.
  CHECK(op.theta_pd_d >= op.lambda);
}

TEST_CASE("more bandwidth never lowers Lambda, a thin link binds", "[planner][model]") {
  double last = 0;
  for (double gbps : {0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 400.0, 1000.0}) {
    const throughput_model m(with_bandwidth(gbps));
    const auto plan = optimise_prfaas_pd(m);
    INFO("bandwidth " << gbps << " Gbps: Lambda " << plan.op.lambda);
    REQUIRE(plan.op.lambda >= last - 1e-12);
    REQUIRE(plan.op.egress_gbps <= gbps * (1 + 1e-9));
    REQUIRE(naive_heterogeneous(m).op.egress_gbps <= gbps * (1 + 1e-9));
    last = plan.op.lambda;
  }
  const throughput_model thin(with_bandwidth(1.0));
  CHECK(naive_heterogeneous(thin).op.binding == constraint::link);
  // At 1 Gbps the link carries ~0.13 req/s of 27K-token KV: offloading barely helps.
  CHECK(optimise_prfaas_pd(thin).op.lambda < paper().report.prfaas_pd.op.lambda);
}

TEST_CASE("PrfaaS-PD is never worse than naive offload, the baselines' shapes",
          "[planner][model]") {
  const auto& r = paper().report;
  CHECK(r.prfaas_pd.op.lambda >= r.naive.op.lambda);
  CHECK(r.naive.op.p == 1.0);
  CHECK(r.naive.op.n_p == 0);
  CHECK(r.naive.op.n_d == 8);
  CHECK(r.homogeneous.op.p == 0.0);
  CHECK(r.homogeneous.op.n_prfaas == 0);
  CHECK(r.homogeneous.op.n_p + r.homogeneous.op.n_d == 12);
  CHECK(r.homogeneous.op.egress_gbps == 0);
  CHECK(r.homogeneous.op.l_short == Approx(paper().cfg.inputs.lengths.mean()));
  CHECK(r.naive.op.l_long == Approx(paper().cfg.inputs.lengths.mean()));
}

TEST_CASE("E[T(L)] per bucket lowers every figure (T is convex)", "[planner][model]") {
  auto in = paper().cfg.inputs;
  in.form = prefill_time_form::expected_time;
  const throughput_model m(in);
  const auto r = plan_all(m);
  const auto& base = paper().report;
  CHECK(r.prfaas_pd.op.lambda < base.prfaas_pd.op.lambda);
  CHECK(r.homogeneous.op.lambda < base.homogeneous.op.lambda);
  CHECK(r.naive.op.lambda < base.naive.op.lambda);
  CHECK(r.prfaas_pd.op.lambda > 0.9 * base.prfaas_pd.op.lambda);
}

TEST_CASE("a measured length list plans end to end", "[planner][model]") {
  auto in = paper().cfg.inputs;
  std::vector<uint64_t> lengths;
  for (int i = 1; i <= 200; ++i)
    lengths.push_back(static_cast<uint64_t>(600 * i));
  in.lengths = length_distribution::empirical(lengths);
  const throughput_model m(in);
  const auto r = plan_all(m);
  CHECK(r.prfaas_pd.op.lambda >= r.naive.op.lambda);
  CHECK(r.prfaas_pd.op.threshold >= 600);
  CHECK(r.prfaas_pd.op.threshold < 120000);
  CHECK(std::isfinite(r.prfaas_pd.op.lambda));
  CHECK(r.prfaas_pd.op.n_p + r.prfaas_pd.op.n_d == 8);
}

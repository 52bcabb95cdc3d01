// The paper's Table 6 from the profiles (configs/paper-case-study.yaml), within the
// issue's tolerances. No figure below is fed to the model: the config's `reference`
// block is printed beside the results and never read by the planner (see the test at
// the end). What the H20 profile's derivation from Table 6 fixes by construction is
// said in its comments and in the config's calibration notes.

#include "planner_fixture.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace prfaas::planner;
using prfaas::planner::test::paper;
using prfaas::planner::test::within;

TEST_CASE("Table 6, PrfaaS-PD: t ~ 19.4K, split 4/3/5, Lambda_max 3.24 +- 5%",
          "[planner][table6]") {
  const auto& op = paper().report.prfaas_pd.op;
  INFO("t " << op.threshold << " p " << op.p << " Lambda " << op.lambda);
  CHECK(within(op.threshold, 19400, 0.05));
  CHECK(op.n_prfaas == 4);
  CHECK(op.n_p == 3);
  CHECK(op.n_d == 5);
  CHECK(within(op.lambda, 3.24, 0.05));
  CHECK(within(op.p, 0.496, 0.03));      // "49.6% of requests go to PrfaaS"
  CHECK(within(op.l_long, 44000, 0.05)); // "E[L | L > t] ~ 44K"
  CHECK(within(op.theta_prfaas, 1.61, 0.05));
  CHECK(within(op.theta_pd_p, 1.64, 0.05));
  CHECK(within(op.theta_pd_d, 3.91, 0.01));
  CHECK(op.binding != constraint::link); // 100 Gbps is far from binding
}

TEST_CASE("Table 6, baselines: homogeneous 2.11 at 9/3, naive 2.45, ratios", "[planner][table6]") {
  const auto& r = paper().report;
  CHECK(r.homogeneous.op.n_p == 9);
  CHECK(r.homogeneous.op.n_d == 3);
  CHECK(within(r.homogeneous.op.lambda, 2.11, 0.05));
  CHECK(within(r.homogeneous.op.theta_pd_d, 2.35, 0.01));
  CHECK(r.naive.op.n_prfaas == 4);
  CHECK(r.naive.op.n_d == 8);
  CHECK(within(r.naive.op.lambda, 2.45, 0.05));
  CHECK(within(r.naive.op.theta_pd_d, 6.25, 0.01));
  CHECK(within(r.ratio_vs_homogeneous(), 3.24 / 2.11, 0.05)); // 1.54x
  CHECK(within(r.ratio_vs_naive(), 3.24 / 2.45, 0.05));       // 1.32x
}

TEST_CASE("Table 6 egress ~ 13 Gbps", "[planner][table6]") {
  const auto& p = paper().report.prfaas_pd;
  INFO("sent " << p.op.egress_gbps << " Gbps, Eq. 2 " << p.eq2_egress_gbps << " Gbps");
  // Eq. 2 with the workload mean, (N/P)·Φ_kv(L_avg): the paper's figure.
  CHECK(within(p.eq2_egress_gbps, 13, 0.05));
  // What the plan actually sends at Lambda_max, Lambda·p·E[S_kv | L > t]: ~8% lower.
  CHECK(within(p.op.egress_gbps, 13, 0.10));
  CHECK(p.op.egress_gbps / 100 == Approx(0.12).margin(0.02)); // "13% of the link"
}

TEST_CASE("closer to Table 6 than the public Python reproduction (3.12 / 2.25 / 2.50)",
          "[planner][table6]") {
  const auto& r = paper().report;
  CHECK(std::abs(r.prfaas_pd.op.lambda - 3.24) < std::abs(3.12 - 3.24));
  CHECK(std::abs(r.homogeneous.op.lambda - 2.11) < std::abs(2.25 - 2.11));
  // Naive: the same T_H200(L_avg) = 1.599 s from Table 5, so the same 2.50 (no worse).
  CHECK(std::abs(r.naive.op.lambda - 2.45) <= std::abs(2.50 - 2.45) + 0.005);
}

TEST_CASE("TTFT: the prefill-only estimate against Table 6", "[planner][table6]") {
  const auto& r = paper().report;
  // P90 is T_H200 at the P90 length in both plans that offload long requests.
  CHECK(within(r.prfaas_pd.ttft.p90_s, 3.51, 0.02));
  CHECK(within(r.naive.ttft.p90_s, 3.51, 0.02));
  CHECK(within(r.prfaas_pd.ttft.mean_s, 2.22, 0.05));
  CHECK(within(r.naive.ttft.mean_s, 1.74, 0.05));
  CHECK(within(r.homogeneous.ttft.mean_s, 4.44, 0.05));
  // The H20 profile is slower than the derived one beyond 32K in the paper (9.73 s).
  CHECK(within(r.homogeneous.ttft.p90_s, 9.73, 0.05));
}

TEST_CASE("the figures follow the inputs, not the reference block", "[planner][table6]") {
  // throughput_model takes case_inputs only; the reference block lives in planner_config.
  // One PrfaaS instance fewer must cost throughput; a 3x PD cluster must gain it.
  auto in = paper().cfg.inputs;
  in.prfaas.instances = 3;
  CHECK(optimise_prfaas_pd(throughput_model(in)).op.lambda < paper().report.prfaas_pd.op.lambda);
  in = paper().cfg.inputs;
  in.pd.instances = 24;
  CHECK(optimise_prfaas_pd(throughput_model(in)).op.lambda > paper().report.prfaas_pd.op.lambda);
}

// The JSON report parses back and carries the plans' figures; the table shows them.

#include "planner_fixture.hpp"
#include "prfaas/planner/report.hpp"

#include <catch2/catch.hpp>

using namespace prfaas::planner;
using nlohmann::json;
using prfaas::planner::test::paper;

TEST_CASE("the JSON report parses and matches the plans", "[planner][report]") {
  const auto& c = paper();
  const std::string text = to_json(c.model, c.report, c.cfg).dump(2);
  const json j = json::parse(text); // throws on malformed output
  const auto& pd = j.at("plans").at("prfaas_pd");
  CHECK(pd.at("lambda_max").get<double>() == Approx(c.report.prfaas_pd.op.lambda));
  CHECK(pd.at("threshold_tokens").get<double>() == Approx(c.report.prfaas_pd.op.threshold));
  CHECK(pd.at("n_prfaas") == 4);
  CHECK(pd.at("n_p") == c.report.prfaas_pd.op.n_p);
  CHECK(pd.at("binding") == to_string(c.report.prfaas_pd.op.binding));
  CHECK(pd.at("egress_gbps").get<double>() == Approx(c.report.prfaas_pd.op.egress_gbps));
  CHECK(pd.at("link_utilisation").get<double>() == Approx(c.report.prfaas_pd.op.egress_gbps / 100));
  const auto& homog = j.at("plans").at("homogeneous_pd");
  CHECK(homog.at("theta_prfaas").is_null());
  CHECK(homog.at("threshold_tokens").is_null());
  CHECK(homog.at("egress_gbps").is_null());
  CHECK(homog.at("lambda_max").get<double>() == Approx(c.report.homogeneous.op.lambda));
  const auto& naive = j.at("plans").at("naive_heterogeneous");
  CHECK(naive.at("theta_pd_p").is_null());
  CHECK(naive.at("p") == 1.0);
  CHECK(j.at("ratios").at("prfaas_over_homogeneous").get<double>() ==
        Approx(c.report.ratio_vs_homogeneous()));
  CHECK(j.at("ratios").at("prfaas_over_naive").get<double>() == Approx(c.report.ratio_vs_naive()));
  CHECK(j.at("decode").at("bs_max") == 20);
  CHECK(j.at("workload").at("mean_input_tokens").get<double>() == Approx(27486).epsilon(0.001));
  CHECK(j.at("reference").at("prfaas_pd").at("lambda_max") == 3.24);
}

TEST_CASE("the table shows each plan beside the paper's column", "[planner][report]") {
  const auto& c = paper();
  const auto t = render_table(c.model, c.report, c.cfg);
  CHECK_THAT(t, Catch::Contains("PrfaaS-PD"));
  CHECK_THAT(t, Catch::Contains("homogeneous PD"));
  CHECK_THAT(t, Catch::Contains("naive hetero"));
  CHECK_THAT(t, Catch::Contains("Lambda_max (req/s)"));
  CHECK_THAT(t, Catch::Contains("3.24")); // the paper's column
  CHECK_THAT(t, Catch::Contains("Lambda ratio PrfaaS-PD / homogeneous PD"));
  CHECK_THAT(t, Catch::Contains("(paper 1.54x)"));
  // Without a reference block the paper columns disappear.
  auto cfg = c.cfg;
  cfg.reference.clear();
  const auto bare = render_table(c.model, c.report, cfg);
  CHECK_THAT(bare, !Catch::Contains("paper"));
}

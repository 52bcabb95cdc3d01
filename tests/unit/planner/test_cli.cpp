// `prfaas-sim plan` as a child process: the JSON the issue asks for, the table, errors.

#include "planner_fixture.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>

using namespace std::chrono_literals;
using nlohmann::json;
using prfaas::planner::test::within;

namespace {

struct sim_run {
  int code = -1;
  std::string out, err, output;
};

sim_run run_sim(std::vector<std::string> args) {
  prfaas::test::temp_dir dir("prfaas-sim");
  prfaas::test::command cmd;
  cmd.argv = {PRFAAS_SIM_BIN};
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  cmd.out_file = dir.path() / "out.log";
  cmd.err_file = dir.path() / "err.log";
  const auto r = prfaas::test::run(cmd, 60s);
  return {r.code.value_or(-1), prfaas::test::read_file(cmd.out_file),
          prfaas::test::read_file(cmd.err_file), r.output};
}

} // namespace

TEST_CASE("prfaas-sim plan --json reproduces Table 6", "[planner][cli]") {
  const auto r = run_sim({"plan", "--config", prfaas::planner::test::case_study_path(), "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const auto& pd = j.at("plans").at("prfaas_pd");
  CHECK(within(pd.at("threshold_tokens").get<double>(), 19400, 0.05));
  CHECK(pd.at("n_prfaas") == 4);
  CHECK(pd.at("n_p") == 3);
  CHECK(pd.at("n_d") == 5);
  CHECK(within(pd.at("lambda_max").get<double>(), 3.24, 0.05));
  CHECK(within(pd.at("eq2_egress_gbps").get<double>(), 13, 0.05));
  CHECK(within(pd.at("egress_gbps").get<double>(), 13, 0.10));
  const auto& homog = j.at("plans").at("homogeneous_pd");
  CHECK(within(homog.at("lambda_max").get<double>(), 2.11, 0.05));
  CHECK(homog.at("n_p") == 9);
  CHECK(homog.at("n_d") == 3);
  CHECK(within(j.at("plans").at("naive_heterogeneous").at("lambda_max").get<double>(), 2.45, 0.05));
  CHECK(within(j.at("ratios").at("prfaas_over_homogeneous").get<double>(), 1.54, 0.05));
}

TEST_CASE("prfaas-sim plan prints the side-by-side table", "[planner][cli]") {
  const auto r = run_sim({"plan", "--config", prfaas::planner::test::case_study_path()});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Lambda_max (req/s)"));
  CHECK_THAT(r.out, Catch::Contains("Lambda ratio PrfaaS-PD / naive heterogeneous"));
}

TEST_CASE("prfaas-sim plan: a bad config exits 2 naming the key, usage errors fail",
          "[planner][cli]") {
  prfaas::test::temp_dir dir("prfaas-sim");
  const auto bad = dir.file("bad.yaml", "clusters:\n  prfaas: {profile: x.yaml}\n");
  const auto r = run_sim({"plan", "--config", bad.string()});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("'clusters.pd' is missing"));
  CHECK(run_sim({"plan"}).code != 0); // --config is required
  CHECK(run_sim({}).code != 0);       // a subcommand is required
  CHECK(run_sim({"plan", "--config", "/nonexistent.yaml"}).code == 2);
}

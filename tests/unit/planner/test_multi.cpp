// The planner for M PrfaaS × N PD clusters (multi.hpp): the one-cluster case against the
// 2-D search of Table 6, invariants of the linear program, shares, links, config errors
// and `prfaas-sim plan` on the M × N config.

#include "planner_fixture.hpp"
#include "prfaas/planner/multi.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>

using namespace prfaas::planner;
using prfaas::planner::test::paper;

namespace {

/// The case study as an M × N input: `m` PrfaaS clusters each with `instances` and a
/// link of `gbps` to every one of `n` PD clusters (8 H20 each).
multi_inputs case_study_grid(size_t m, size_t n, uint32_t instances = 4, double gbps = 100) {
  const auto& c = paper().cfg.inputs;
  multi_inputs in;
  static_cast<workload_inputs&>(in) = c;
  for (size_t i = 0; i < m; ++i)
    in.prfaas.push_back({"p" + std::to_string(i), {c.prfaas.profile, instances}});
  for (size_t j = 0; j < n; ++j) {
    in.pd.push_back({"d" + std::to_string(j), c.pd, 0});
    for (size_t i = 0; i < m; ++i)
      in.links.push_back({i, j, gbps});
  }
  return in;
}

std::string two_by_three() {
  return std::string(PRFAAS_SOURCE_DIR) + "/configs/planner/two-by-three.yaml";
}

} // namespace

TEST_CASE("M = N = 1 is the case study's plan (Table 6)", "[planner][multi]") {
  const auto& want = paper().report.prfaas_pd.op;
  const multi_model m(case_study_grid(1, 1));
  const auto plan = optimise_multi(m);
  const auto& got = plan.best;
  INFO("t " << got.choice[0].threshold << " vs " << want.threshold << ", lambda " << got.lambda
            << " vs " << want.lambda);
  CHECK(got.choice[0].n_p == want.n_p);
  CHECK(got.choice[0].n_d == want.n_d);
  CHECK(got.lambda == Approx(want.lambda).epsilon(1e-6));
  // The lengths are binned: every t between two bin edges is the same plan. The two
  // searches land in the same bin.
  const auto& lengths = paper().cfg.inputs.lengths;
  CHECK(lengths.split_index(got.choice[0].threshold) == lengths.split_index(want.threshold));
  CHECK(got.choice[0].threshold == Approx(want.threshold).epsilon(1e-3));
  CHECK(got.pd[0].p == Approx(want.p).epsilon(1e-4));
  CHECK(got.pd[0].theta_pd_p == Approx(want.theta_pd_p).epsilon(1e-4));
  CHECK(got.pd[0].theta_pd_d == Approx(want.theta_pd_d).epsilon(1e-9));
  CHECK(got.links[0].gbps == Approx(want.egress_gbps).epsilon(1e-4));
  // What binds is what the 2-D search says binds (the PrfaaS side's compute); decode
  // does not.
  REQUIRE(want.binding == constraint::prfaas_prefill);
  CHECK(got.prfaas[0].binding);
  CHECK_FALSE(got.links[0].binding);
  CHECK_FALSE(got.pd[0].decode_binding);
  // The LP at the 2-D search's own choice gives Eq. 6's Λ.
  CHECK(m.rate({{want.threshold, want.n_p, want.n_d}}, true) == Approx(want.lambda).epsilon(1e-9));
}

TEST_CASE("with one link the LP's t and split searches are the one-cluster model's",
          "[planner][multi]") {
  const auto& c = paper().cfg.inputs;
  const throughput_model one(c);
  const multi_model lp(case_study_grid(1, 1));
  const uint32_t n = c.prfaas.instances, total = c.pd.instances;
  for (uint32_t n_p : {1u, 3u, 5u}) {
    INFO("split " << n_p << " / " << total - n_p);
    const auto want = best_threshold(one, n, n_p, total - n_p);
    const auto got = best_threshold(lp, n_p, total - n_p);
    CHECK(got.lambda == Approx(want.lambda).epsilon(1e-6));
    CHECK(got.prefill_lambda == Approx(prefill_capacity(want)).epsilon(1e-6));
    CHECK(c.lengths.split_index(got.choice[0].threshold) == c.lengths.split_index(want.threshold));
  }
  const auto want = best_split(one, n, total, 1, total - 1);
  const auto got = best_split(lp, 1, total - 1);
  CHECK(got.choice[0].n_p == want.n_p);
  CHECK(got.lambda == Approx(want.lambda).epsilon(1e-6));
  // The joint search lands on the same plan (Table 6).
  CHECK(got.lambda == Approx(optimise_multi(lp).best.lambda).epsilon(1e-4));
}

TEST_CASE("one PD cluster with two links: the searches use both, and a slower second link "
          "adds what it carries",
          "[planner][multi]") {
  // Two PrfaaS clusters of 2 instances each, behind 100 and 100 Gbit/s, or behind 100
  // and 1 Gbit/s, against one cluster of 2 behind 100.
  auto fast = case_study_grid(2, 1, 2, 100);
  auto slow = fast;
  slow.links[1].gbps = 1;
  const multi_model both(fast), lopsided(slow), half(case_study_grid(1, 1, 2, 100));
  const uint32_t total = paper().cfg.inputs.pd.instances;
  const auto b = best_split(both, 1, total - 1);
  const auto l = best_split(lopsided, 1, total - 1);
  const auto h = best_split(half, 1, total - 1);
  INFO("both " << b.lambda << ", lopsided " << l.lambda << ", one cluster of two " << h.lambda);
  CHECK(b.lambda > l.lambda);
  CHECK(l.lambda > h.lambda);
  // Each at least as good as what the joint optimum finds (the searches scan t finely;
  // optimise_multi bisects on Λ): within 1%.
  for (const auto* m : {&both, &lopsided}) {
    const auto joint = optimise_multi(*m).best.lambda;
    const auto searched = best_split(*m, 1, total - 1).lambda;
    CHECK(searched == Approx(joint).epsilon(0.01));
  }
  // The slow link carries no more than it can.
  CHECK(l.links[1].gbps <= 1 * (1 + 1e-9));
  // More than one PD cluster is not what these searches are for.
  CHECK_THROWS_AS(best_threshold(multi_model(case_study_grid(1, 2)), 1, 7), std::invalid_argument);
}

TEST_CASE("two PrfaaS clusters of half the size behind half-rate links plan as one",
          "[planner][multi]") {
  const auto one = optimise_multi(multi_model(case_study_grid(1, 2, 4, 100))).best;
  const auto two = optimise_multi(multi_model(case_study_grid(2, 2, 2, 50))).best;
  CHECK(two.lambda == Approx(one.lambda).epsilon(1e-6));
  // Each PD cluster gets half (equal instances, no shares given).
  CHECK(two.pd[0].lambda == Approx(two.lambda / 2).epsilon(1e-9));
  CHECK(two.pd[1].lambda == Approx(two.lambda / 2).epsilon(1e-9));
  // Two PD clusters sharing the case study's PrfaaS cluster carry less than twice one.
  CHECK(one.lambda < 2 * paper().report.prfaas_pd.op.lambda);
  CHECK(one.lambda > paper().report.prfaas_pd.op.lambda);
}

TEST_CASE("a PD cluster without a link prefills at home and its share bounds the plan",
          "[planner][multi]") {
  auto in = case_study_grid(1, 2);
  in.links.pop_back(); // d1 loses its only link
  const multi_model m(in);
  const auto best = optimise_multi(m).best;
  REQUIRE_FALSE(m.linked(1));
  CHECK(best.pd[1].p == 0);
  CHECK(best.links.size() == 1);
  // d1 alone is the homogeneous PD cluster of 8 H20s: the best split's rate.
  auto hom = paper().cfg.inputs;
  hom.homogeneous_instances = 8;
  const auto h = homogeneous_pd(throughput_model(hom)).op;
  CHECK(best.pd[1].lambda == Approx(h.lambda).epsilon(1e-6));
  CHECK(best.lambda == Approx(2 * h.lambda).epsilon(1e-6));
  CHECK(best.pd[0].lambda == Approx(h.lambda).epsilon(1e-6)); // the same share, no more
}

TEST_CASE("the M x N plan respects every link, cluster and share", "[planner][multi]") {
  const auto cfg = load_multi_config(two_by_three());
  REQUIRE(cfg.inputs.prfaas.size() == 2);
  REQUIRE(cfg.inputs.pd.size() == 3);
  REQUIRE(cfg.inputs.links.size() == 6);
  const multi_model m(cfg.inputs);
  const auto best = optimise_multi(m).best;
  REQUIRE(best.lambda > 0);
  for (size_t k = 0; k < best.links.size(); ++k) {
    INFO("link " << k);
    CHECK(best.links[k].gbps <= best.links[k].capacity_gbps * (1 + 1e-9));
  }
  for (auto& p : best.prfaas)
    CHECK(p.busy <= 1 + 1e-9);
  for (size_t j = 0; j < best.pd.size(); ++j) {
    INFO("PD cluster " << j);
    CHECK(best.pd[j].lambda == Approx(best.lambda / 3).epsilon(1e-9));
    double offloaded = 0;
    for (size_t k = 0; k < best.links.size(); ++k)
      if (cfg.inputs.links[k].pd == j)
        offloaded += best.links[k].requests_per_s;
    CHECK(offloaded == Approx(best.pd[j].p * best.pd[j].lambda).epsilon(1e-6));
    CHECK(best.pd[j].lambda * (1 - best.pd[j].p) <= best.pd[j].theta_pd_p * (1 + 1e-9));
  }
  // Something binds: the plan is at the edge of what the deployment carries.
  bool binds = false;
  for (auto& l : best.links)
    binds |= l.binding;
  for (auto& p : best.prfaas)
    binds |= p.binding;
  CHECK(binds);
  // More bandwidth on the link that binds never lowers Λ; losing links never raises it.
  auto more = cfg.inputs;
  for (size_t k = 0; k < best.links.size(); ++k)
    if (best.links[k].binding)
      more.links[k].gbps *= 4;
  CHECK(optimise_multi(multi_model(more)).best.lambda >= best.lambda * (1 - 1e-9));
  auto fewer = cfg.inputs;
  fewer.links.erase(fewer.links.begin()); // east -> a, the widest
  CHECK(optimise_multi(multi_model(fewer)).best.lambda <= best.lambda * (1 + 1e-9));
}

TEST_CASE("split by rate: each PD cluster's links carry its KV in proportion to their "
          "bandwidth, at a Λ no higher than the free routing's",
          "[planner][multi]") {
  const auto cfg = load_multi_config(two_by_three());
  const auto free = optimise_multi(multi_model(cfg.inputs)).best;
  auto in = cfg.inputs;
  in.split_by_rate = true;
  const auto split = optimise_multi(multi_model(in)).best;
  REQUIRE(split.lambda > 0);
  CHECK(split.lambda <= free.lambda * (1 + 1e-9));
  for (size_t j = 0; j < in.pd.size(); ++j) {
    double gbps = 0, rate = 0;
    for (size_t k = 0; k < in.links.size(); ++k)
      if (in.links[k].pd == j) {
        gbps += split.links[k].gbps;
        rate += in.links[k].gbps;
      }
    REQUIRE(gbps > 0);
    for (size_t k = 0; k < in.links.size(); ++k)
      if (in.links[k].pd == j) {
        INFO("link " << k);
        CHECK(split.links[k].gbps / gbps == Approx(in.links[k].gbps / rate).epsilon(1e-6));
      }
  }
  // The free routing does not follow the rates here (a's offload goes west).
  CHECK(free.links[0].gbps / (free.links[0].gbps + free.links[1].gbps) < 100.0 / 120 - 0.1);
  // With one link per PD cluster there is nothing to split: the same plan.
  auto one = case_study_grid(1, 2);
  const auto one_free = optimise_multi(multi_model(one)).best;
  one.split_by_rate = true;
  CHECK(optimise_multi(multi_model(one)).best.lambda == Approx(one_free.lambda).epsilon(1e-12));
}

TEST_CASE("shares set each PD cluster's part of the total", "[planner][multi]") {
  auto in = case_study_grid(1, 2);
  in.pd[0].share = 3;
  in.pd[1].share = 1;
  const auto best = optimise_multi(multi_model(in)).best;
  CHECK(best.pd[0].lambda == Approx(3 * best.pd[1].lambda).epsilon(1e-9));
  CHECK(best.pd[0].lambda + best.pd[1].lambda == Approx(best.lambda).epsilon(1e-9));
}

TEST_CASE("bad M x N configs are rejected naming the key", "[planner][multi][config]") {
  const std::string head = R"(
prfaas_clusters:
  - { name: east, profile: ../profiles/kimi-linear-1t-h200.yaml, instances: 4 }
pd_clusters:
  - { name: a, profile: ../profiles/kimi-linear-1t-h20.yaml, instances: 8 }
  - { name: b, profile: ../profiles/kimi-linear-1t-h20.yaml, instances: 8 }
workload:
  input_lengths: { kind: lognormal, mu: 9.9, sigma: 1, min_tokens: 128, max_tokens: 131072 }
  output_tokens: 1024
  decode_slo_tokens_per_s: 40
)";
  const auto base = std::filesystem::path(PRFAAS_SOURCE_DIR) / "configs" / "planner";
  auto error_of = [&](const std::string& text) -> std::string {
    try {
      parse_multi_config(text, "x.yaml", base);
    } catch (const config_error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of(head + "links:\n  - { between: [east, a], bandwidth_gbps: 100 }\n").empty());
  CHECK_THAT(error_of(head + "links:\n  - { between: [west, a], bandwidth_gbps: 100 }\n"),
             Catch::Contains("'links[0].between' names 'west', not a declared PrfaaS cluster"));
  CHECK_THAT(error_of(head + "links:\n  - { between: [east, a], bandwidth_gbps: 0 }\n"),
             Catch::Contains("'links[0].bandwidth_gbps' must be > 0"));
  CHECK_THAT(error_of(head + "links:\n  - { between: [east], bandwidth_gbps: 1 }\n"),
             Catch::Contains("'links[0].between' must be [PRFAAS_CLUSTER, PD_CLUSTER]"));
  CHECK_THAT(error_of(head + "links: []\n"), Catch::Contains("'links' must be a non-empty list"));
  CHECK_THAT(error_of(head + "links:\n  - { between: [east, a], bandwidth_gbps: 1 }\n"
                             "search: { threshold_points: 64 }\n"),
             Catch::Contains("'search' is not a known key here"));
  std::string dup = head;
  dup.replace(dup.find("name: b"), 7, "name: a");
  CHECK_THAT(error_of(dup + "links:\n  - { between: [east, a], bandwidth_gbps: 1 }\n"),
             Catch::Contains("'pd_clusters[1].name' repeats 'a'"));
  std::string partial = head;
  partial.replace(partial.find("instances: 8 }"), 14, "instances: 8, share: 2 }");
  CHECK_THAT(error_of(partial + "links:\n  - { between: [east, a], bandwidth_gbps: 1 }\n"),
             Catch::Contains("give every cluster a 'share' or none"));
  CHECK_THAT(error_of(head + "links:\n  - { between: [east, a], bandwidth_gbps: 1 }\n"
                             "link_split: even\n"),
             Catch::Contains("'link_split' must be soonest or rate, not 'even'"));
}

TEST_CASE("prfaas-sim plan on the M x N config prints every cluster and link", "[planner][cli]") {
  using namespace std::chrono_literals;
  prfaas::test::temp_dir dir("prfaas-sim");
  prfaas::test::command cmd;
  cmd.argv = {PRFAAS_SIM_BIN, "plan", "--config", two_by_three(), "--json"};
  cmd.out_file = dir.path() / "out.log";
  cmd.err_file = dir.path() / "err.log";
  const auto r = prfaas::test::run(cmd, 60s);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(prfaas::test::read_file(cmd.out_file));
  CHECK(j.at("pd_clusters").size() == 3);
  CHECK(j.at("links").size() == 6);
  CHECK(j.at("prfaas_clusters").size() == 2);
  const auto in = load_multi_config(two_by_three()).inputs;
  CHECK(j.at("lambda").get<double>() ==
        Approx(optimise_multi(multi_model(in)).best.lambda).epsilon(1e-12));
}

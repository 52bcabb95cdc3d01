#include "prfaas/planner/length_distribution.hpp"
#include "prfaas/planner/trace_lengths.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

using namespace prfaas::planner;

TEST_CASE("the case-study log-normal has mean ~27K and matches its closed form",
          "[planner][distribution]") {
  const auto d = length_distribution::lognormal({});
  // Closed form: e^{μ+σ²/2}·(Φ(z_hi − σ) − Φ(z_lo − σ)) / (Φ(z_hi) − Φ(z_lo)).
  CHECK(d.analytic_mean() == Approx(27486).epsilon(0.001));
  CHECK(d.mean() == Approx(d.analytic_mean()).epsilon(1e-9));
  CHECK(d.mean() > 26000);
  CHECK(d.mean() < 28500);
  const auto& w = d.weights();
  CHECK(std::accumulate(w.begin(), w.end(), 0.0) == Approx(1.0).epsilon(1e-12));
  CHECK(d.min() >= 128);
  CHECK(d.max() <= 131072);
  CHECK(std::is_sorted(d.points().begin(), d.points().end()));
}

TEST_CASE("p = P(L > t) is non-increasing in t, 1 below the range and 0 above it",
          "[planner][distribution]") {
  const auto d = length_distribution::lognormal({});
  CHECK(d.tail_probability(100) == 1.0);
  CHECK(d.tail_probability(131072) == 0.0);
  double last = 1.0;
  for (double t = 128; t <= 131072; t *= 1.01) {
    const double p = d.tail_probability(t);
    REQUIRE(p <= last);
    last = p;
  }
  // The paper: "at t = 19.4K, 49.6% of requests go to PrfaaS".
  CHECK(d.tail_probability(19400) == Approx(0.496).margin(0.002));
  // The median: half the mass on each side. Cutting the 3% above 128K moves it below e^μ.
  const double median = d.quantile(0.5);
  CHECK(d.tail_probability(median) == Approx(0.5).margin(0.001));
  CHECK(median < std::exp(9.90));
  CHECK(median > 0.95 * std::exp(9.90));
}

TEST_CASE("an empirical distribution weighs each length equally", "[planner][distribution]") {
  const auto d = length_distribution::empirical({100, 300, 100, 200});
  REQUIRE(d.size() == 3);
  CHECK(d.mean() == Approx(175));
  CHECK(d.tail_probability(100) == Approx(0.5));
  CHECK(d.tail_probability(99) == Approx(1.0));
  CHECK(d.tail_probability(300) == 0.0);
  CHECK(d.quantile(0.5) == 100);
  CHECK(d.quantile(0.75) == 200);
  CHECK_THROWS_AS(length_distribution::empirical({}), std::invalid_argument);
  CHECK_THROWS_AS(length_distribution::lognormal({9.9, 0.0, 128, 131072, 100}),
                  std::invalid_argument);
}

TEST_CASE("trace lengths: an infinite prefix cache keyed by chained block ids",
          "[planner][distribution]") {
  prfaas::test::temp_dir dir("prfaas-planner");
  const auto file = dir.file("t.jsonl",
                             // 2 full blocks + a partial one; nothing cached yet.
                             R"({"timestamp": 0, "input_length": 1300, "hash_ids": [1, 2, 3]})"
                             "\n"
                             // shares blocks 1, 2: 1400 − 1024.
                             R"({"timestamp": 1, "input_length": 1400, "hash_ids": [1, 2, 4]})"
                             "\n\n"
                             // the partial block 3 was never cached: only block 1 hits.
                             R"({"timestamp": 2, "input_length": 1100, "hash_ids": [1, 5, 3]})"
                             "\n"
                             // fully cached: still one token to prefill.
                             R"({"timestamp": 3, "input_length": 1024, "hash_ids": [1, 2]})"
                             "\n"
                             // a different first block: no reuse even though 2 is cached.
                             R"({"timestamp": 4, "input_length": 1024, "hash_ids": [9, 2]})"
                             "\n");
  const auto t = load_trace_lengths(file.string());
  CHECK(t.uncached == std::vector<uint64_t>{1300, 376, 588, 1, 1024});
  CHECK(t.requests == 5);
  CHECK(t.mean_input == Approx((1300 + 1400 + 1100 + 1024 + 1024) / 5.0));
  const auto raw = load_trace_lengths(file.string(), 512, false);
  CHECK(raw.uncached == std::vector<uint64_t>{1300, 1400, 1100, 1024, 1024});

  const auto bad = dir.file("bad.jsonl", "{\"input_length\": 5, \"hash_ids\": []}\n{oops\n");
  try {
    load_trace_lengths(bad.string());
    FAIL("a malformed line was accepted");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("line 2"));
  }
  CHECK_THROWS_AS(load_trace_lengths((dir.path() / "missing.jsonl").string()), std::runtime_error);
}

TEST_CASE("the Mooncake synthetic trace: the prefix cache removes part of the input",
          "[planner][distribution]") {
  const auto t = load_trace_lengths(PRFAAS_MOONCAKE_TRACE);
  CHECK(t.requests == 3993);
  CHECK(t.mean_input == Approx(15325).epsilon(0.01)); // data/traces/README.md's average
  CHECK(t.mean_uncached < t.mean_input);
  CHECK(t.mean_uncached > 0);
  const auto d = length_distribution::empirical(t.uncached);
  CHECK(d.mean() == Approx(t.mean_uncached));
}

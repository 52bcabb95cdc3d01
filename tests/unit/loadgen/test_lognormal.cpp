#include <cmath>

#include <catch2/catch.hpp>

#include "loadgen/lognormal.hpp"

using namespace prfaas::loadgen;

namespace {

/// E[X | min <= X <= max] by numerical integration over ln x, independent of mean().
double integrated_mean(const lognormal_params& p) {
  const int n = 200000;
  double a = std::log(p.min), b = std::log(p.max), h = (b - a) / n;
  double num = 0, den = 0;
  for (int i = 0; i <= n; ++i) {
    double y = a + i * h, w = (i == 0 || i == n) ? 0.5 : 1.0;
    double pdf = std::exp(-0.5 * std::pow((y - p.mu) / p.sigma, 2)); // density of ln X
    num += w * pdf * std::exp(y);
    den += w * pdf;
  }
  return num / den;
}

} // namespace

TEST_CASE("lognormal: the normal quantile inverts the CDF") {
  for (double p : {1e-12, 1e-6, 0.01, 0.02425, 0.3, 0.5, 0.77, 0.975, 0.999999})
    CHECK(normal_cdf(normal_quantile(p)) == Approx(p).epsilon(1e-9));
  CHECK(normal_quantile(0.5) == Approx(0.0).margin(1e-12));
  CHECK(normal_quantile(0.975) == Approx(1.959963984540054).epsilon(1e-12));
}

TEST_CASE("lognormal: the analytic truncated mean matches integration and the paper") {
  lognormal_params paper;
  truncated_lognormal d{paper};
  CHECK(d.mean() == Approx(integrated_mean(paper)).epsilon(1e-4));
  // The paper's case study (log-normal μ = 9.90, σ = 1.00 over [128, 128K]): mean ≈ 27K.
  CHECK(d.mean() > 26500);
  CHECK(d.mean() < 28000);
  lognormal_params narrow{5.0, 0.5, 100, 200};
  CHECK(truncated_lognormal{narrow}.mean() == Approx(integrated_mean(narrow)).epsilon(1e-4));
}

TEST_CASE("lognormal: draws stay in range and their mean matches the truncated mean") {
  truncated_lognormal d{{}};
  std::mt19937_64 rng{20240601};
  const int n = 400000;
  double sum = 0;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int i = 0; i < n; ++i) {
    auto x = d.tokens(rng);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  CHECK(lo >= 128);
  CHECK(hi <= 131072);
  // Standard error is ~22K/sqrt(n) ~ 35 tokens; 1% is ~270.
  CHECK(sum / n == Approx(d.mean()).epsilon(0.01));
  // Both tails are reached: the truncation is not a clamp of a narrower law.
  CHECK(lo < 1000);
  CHECK(hi > 100000);
}

TEST_CASE("lognormal: a range deep in a tail still samples inside it") {
  // P(X in [1000, 2000]) for ln X ~ N(0, 1) is ~1e-10: rejection sampling would hang.
  truncated_lognormal d{{0.0, 1.0, 1000, 2000}};
  std::mt19937_64 rng{1};
  for (int i = 0; i < 1000; ++i) {
    double x = d(rng);
    REQUIRE(x >= 1000);
    REQUIRE(x <= 2000);
  }
}

TEST_CASE("lognormal: bad parameters are refused") {
  CHECK_THROWS_AS(truncated_lognormal({9.9, 0.0, 128, 1024}), std::invalid_argument);
  CHECK_THROWS_AS(truncated_lognormal({9.9, 1.0, 0, 1024}), std::invalid_argument);
  CHECK_THROWS_AS(truncated_lognormal({9.9, 1.0, 2048, 1024}), std::invalid_argument);
}

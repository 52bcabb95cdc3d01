#pragma once

// The paper's input-length distribution: a log-normal truncated to [min, max].

#include <cstdint>
#include <random>

namespace prfaas::loadgen {

/// Parameters of ln X ~ N(mu, sigma^2), X kept to [min, max]. The defaults are the
/// paper's workload: mean ~27K tokens over [128, 128K].
struct lognormal_params {
  double mu = 9.90;
  double sigma = 1.00;
  double min = 128;
  double max = 128 * 1024;
};

/// Samples by inverse CDF over [F(min), F(max)], so every draw takes exactly one
/// uniform from the engine and lands in range whatever the truncation cuts away.
class truncated_lognormal {
public:
  /// Throws std::invalid_argument unless sigma > 0 and 0 < min <= max.
  explicit truncated_lognormal(lognormal_params p);

  const lognormal_params& params() const { return p_; }

  /// One real-valued draw in [min, max].
  double operator()(std::mt19937_64& rng) const;

  /// One draw rounded to whole tokens, in [ceil(min), floor(max)].
  uint32_t tokens(std::mt19937_64& rng) const;

  /// The analytic mean of the truncated (continuous) distribution.
  double mean() const;

private:
  lognormal_params p_;
  double cdf_lo_; ///< Phi((ln min - mu) / sigma)
  double cdf_hi_; ///< Phi((ln max - mu) / sigma)
};

/// Standard normal CDF.
double normal_cdf(double z);
/// Its inverse, for 0 < p < 1 (relative error below 1e-12 after one refinement).
double normal_quantile(double p);

} // namespace prfaas::loadgen

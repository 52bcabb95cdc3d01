#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace prfaas::planner {

/// A log-normal input-length law truncated to [min_tokens, max_tokens] (the paper's case
/// study: μ = 9.90, σ = 1.00 on ln(tokens), range [128, 128K], mean ≈ 27.5K tokens).
struct lognormal_params {
  double mu = 9.90;
  double sigma = 1.00;
  double min_tokens = 128;
  double max_tokens = 131072;
  /// Log-spaced bins of the discretisation; each bin's mass and conditional mean are
  /// exact (closed form), so only the position of a threshold inside a bin is approximate.
  uint32_t bins = 20000;
};

/// A discrete distribution of uncached (incremental) prefill lengths, in tokens: sorted
/// support points with probabilities summing to 1. Both the parametric law (finely
/// discretised, deterministic) and measured lengths use this one representation, so the
/// model never cares where the lengths came from.
///
/// Thresholds route `l > t` to PrfaaS: a support point equal to t stays local.
class length_distribution {
public:
  /// Empty; only for aggregates that are filled in later (the model rejects it).
  length_distribution() = default;
  /// Truncated log-normal, discretised on `bins` log-spaced bins. Throws
  /// std::invalid_argument on parameters that define no distribution.
  static length_distribution lognormal(const lognormal_params& p);
  /// Equal weight on each given length (e.g. a trace's uncached lengths). Throws
  /// std::invalid_argument on an empty list.
  static length_distribution empirical(std::vector<uint64_t> lengths);

  const std::vector<double>& points() const { return x_; }
  const std::vector<double>& weights() const { return w_; }
  size_t size() const { return x_.size(); }
  bool empty() const { return x_.empty(); }
  double min() const { return x_.front(); }
  double max() const { return x_.back(); }
  double mean() const { return mean_; }
  /// One line saying what this is ("lognormal mu=9.9 ..." or "empirical n=3993").
  const std::string& description() const { return description_; }
  /// For the closed-form law: its analytic truncated mean (a cross-check of mean()).
  double analytic_mean() const { return analytic_mean_; }

  /// Index of the first support point > t (points [0, i) stay local, [i, n) offload).
  size_t split_index(double t) const;
  /// p = P(L > t).
  double tail_probability(double t) const;
  /// c[i] = Σ_{j<i} w_j · f(x_j); c has size()+1 entries, so a bucket's partial
  /// expectation E[f(L)·1{bucket}] is a difference of two entries.
  std::vector<double> cumulative(const std::function<double(double)>& f) const;
  /// The smallest support point x with P(L ≤ x) ≥ q.
  double quantile(double q) const;

private:
  length_distribution(std::vector<double> x, std::vector<double> w, std::string description);
  std::vector<double> x_, w_, cum_w_, tail_w_;
  double mean_ = 0, analytic_mean_ = 0;
  std::string description_;
};

} // namespace prfaas::planner

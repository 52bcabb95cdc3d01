#include "prfaas/planner/length_distribution.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace prfaas::planner {

namespace {

/// Standard normal CDF, accurate in both tails (erfc, no 1 − Φ cancellation).
double norm_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

} // namespace

length_distribution::length_distribution(std::vector<double> x, std::vector<double> w,
                                         std::string description)
    : x_(std::move(x)), w_(std::move(w)), description_(std::move(description)) {
  double total = 0;
  for (double v : w_)
    total += v;
  cum_w_.assign(w_.size() + 1, 0.0);
  for (size_t i = 0; i < w_.size(); ++i) {
    w_[i] /= total;
    cum_w_[i + 1] = cum_w_[i] + w_[i];
    mean_ += w_[i] * x_[i];
  }
  analytic_mean_ = mean_;
  // Suffix sums, so P(L > t) is exact (0 past the support) instead of 1 − a rounded sum.
  tail_w_.assign(w_.size() + 1, 0.0);
  for (size_t i = w_.size(); i-- > 0;)
    tail_w_[i] = tail_w_[i + 1] + w_[i];
}

length_distribution length_distribution::lognormal(const lognormal_params& p) {
  if (!(p.sigma > 0) || !(p.min_tokens >= 1) || !(p.max_tokens > p.min_tokens) || p.bins < 2)
    throw std::invalid_argument("lognormal: need sigma > 0, 1 <= min_tokens < max_tokens, "
                                "bins >= 2");
  const double a = std::log(p.min_tokens), b = std::log(p.max_tokens);
  const double z_lo = (a - p.mu) / p.sigma, z_hi = (b - p.mu) / p.sigma;
  const double mass = norm_cdf(z_hi) - norm_cdf(z_lo);
  if (!(mass > 1e-12))
    throw std::invalid_argument("lognormal: the range [min_tokens, max_tokens] holds no mass");
  // E[L·1{L ≤ x}] = e^{μ+σ²/2}·Φ(z(x) − σ): the partial expectation of the log-normal.
  const double scale = std::exp(p.mu + p.sigma * p.sigma / 2);
  std::vector<double> x, w;
  x.reserve(p.bins);
  w.reserve(p.bins);
  for (uint32_t k = 0; k < p.bins; ++k) {
    const double z0 = (a + (b - a) * k / p.bins - p.mu) / p.sigma;
    const double z1 = (a + (b - a) * (k + 1) / p.bins - p.mu) / p.sigma;
    const double m = norm_cdf(z1) - norm_cdf(z0);
    if (!(m > 0))
      continue; // a bin too far in a tail to hold representable mass
    const double partial = scale * (norm_cdf(z1 - p.sigma) - norm_cdf(z0 - p.sigma));
    // The bin's conditional mean, clamped into the bin against rounding.
    const double lo = std::exp(p.sigma * z0 + p.mu), hi = std::exp(p.sigma * z1 + p.mu);
    x.push_back(std::clamp(partial / m, lo, hi));
    w.push_back(m);
  }
  std::ostringstream d;
  d << "lognormal mu=" << p.mu << " sigma=" << p.sigma << " range=[" << p.min_tokens << ", "
    << p.max_tokens << "] bins=" << p.bins;
  length_distribution out(std::move(x), std::move(w), d.str());
  out.analytic_mean_ = scale * (norm_cdf(z_hi - p.sigma) - norm_cdf(z_lo - p.sigma)) / mass;
  return out;
}

length_distribution length_distribution::empirical(std::vector<uint64_t> lengths) {
  if (lengths.empty())
    throw std::invalid_argument("empirical length distribution: no lengths");
  std::sort(lengths.begin(), lengths.end());
  std::vector<double> x, w;
  for (uint64_t l : lengths) {
    if (!x.empty() && x.back() == static_cast<double>(l))
      w.back() += 1;
    else
      x.push_back(static_cast<double>(l)), w.push_back(1);
  }
  length_distribution out(std::move(x), std::move(w),
                          "empirical n=" + std::to_string(lengths.size()));
  return out;
}

size_t length_distribution::split_index(double t) const {
  return static_cast<size_t>(std::upper_bound(x_.begin(), x_.end(), t) - x_.begin());
}

double length_distribution::tail_probability(double t) const {
  const size_t k = split_index(t);
  return k == 0 ? 1.0 : std::min(1.0, tail_w_[k]);
}

std::vector<double> length_distribution::cumulative(const std::function<double(double)>& f) const {
  std::vector<double> c(x_.size() + 1, 0.0);
  for (size_t i = 0; i < x_.size(); ++i)
    c[i + 1] = c[i] + w_[i] * f(x_[i]);
  return c;
}

double length_distribution::quantile(double q) const {
  const auto it = std::lower_bound(cum_w_.begin() + 1, cum_w_.end(), q - 1e-12);
  const size_t i = std::min(static_cast<size_t>(it - cum_w_.begin()) - 1, x_.size() - 1);
  return x_[i];
}

} // namespace prfaas::planner

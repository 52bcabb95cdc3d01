#include "loadgen/lognormal.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prfaas::loadgen {

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double normal_quantile(double p) {
  // Acklam's rational approximation (relative error 1.15e-9), then one Halley step
  // against erfc.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double low = 0.02425;
  double x;
  if (p < low) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - low) {
    double q = p - 0.5;
    double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = normal_cdf(x) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

truncated_lognormal::truncated_lognormal(lognormal_params p) : p_(p) {
  if (!(p_.sigma > 0))
    throw std::invalid_argument("log-normal sigma must be > 0");
  if (!(p_.min > 0) || !(p_.min <= p_.max))
    throw std::invalid_argument("log-normal range must satisfy 0 < min <= max");
  cdf_lo_ = normal_cdf((std::log(p_.min) - p_.mu) / p_.sigma);
  cdf_hi_ = normal_cdf((std::log(p_.max) - p_.mu) / p_.sigma);
}

double truncated_lognormal::operator()(std::mt19937_64& rng) const {
  double u = std::uniform_real_distribution<double>{0.0, 1.0}(rng);
  double p = cdf_lo_ + u * (cdf_hi_ - cdf_lo_);
  // Keep p strictly inside (0, 1) for the quantile; the clamp below absorbs the rest.
  p = std::clamp(p, 1e-300, 1 - 1e-16);
  double x = std::exp(p_.mu + p_.sigma * normal_quantile(p));
  return std::clamp(x, p_.min, p_.max);
}

uint32_t truncated_lognormal::tokens(std::mt19937_64& rng) const {
  double lo = std::ceil(p_.min);
  double hi = std::max(lo, std::floor(p_.max));
  return static_cast<uint32_t>(std::clamp(std::round((*this)(rng)), lo, hi));
}

double truncated_lognormal::mean() const {
  // E[X | min <= X <= max] = e^{mu + sigma^2/2} (Phi(b - sigma) - Phi(a - sigma)) /
  //                                              (Phi(b) - Phi(a)).
  double a = (std::log(p_.min) - p_.mu) / p_.sigma;
  double b = (std::log(p_.max) - p_.mu) / p_.sigma;
  double mass = cdf_hi_ - cdf_lo_;
  if (mass <= 0)
    return p_.min; // the whole range sits in a tail the doubles cannot resolve
  return std::exp(p_.mu + p_.sigma * p_.sigma / 2) *
         (normal_cdf(b - p_.sigma) - normal_cdf(a - p_.sigma)) / mass;
}

} // namespace prfaas::loadgen

#pragma once

// Internal to the planner: the threshold search best_threshold runs on the one-cluster
// model (planner.cpp) and on the M × N LP (multi.cpp).

#include <algorithm>
#include <cstdint>

namespace prfaas::planner::detail {

/// `points` + 1 evenly spaced candidates u over [lo, hi] (u = log t), then `rounds` of
/// 64-point refinement around the best so far. `try_u(u)` evaluates a candidate and
/// returns whether it became the best (the caller keeps it); `best_u` starts at `lo`.
template <class Try>
void scan_log_thresholds(double lo, double hi, uint32_t points, uint32_t rounds, Try&& try_u) {
  double best_u = lo;
  auto scan = [&](double a, double b, uint32_t k) {
    for (uint32_t i = 0; i <= k; ++i) {
      const double u = a + (b - a) * i / k;
      if (try_u(u))
        best_u = u;
    }
  };
  scan(lo, hi, points);
  double step = (hi - lo) / points;
  for (uint32_t r = 0; r < rounds; ++r) {
    const double a = std::max(lo, best_u - step), b = std::min(hi, best_u + step);
    scan(a, b, 64);
    step = (b - a) / 64;
  }
}

} // namespace prfaas::planner::detail

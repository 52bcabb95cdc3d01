#pragma once

// Small helpers for benchmark figures: percentiles and human-readable units.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace prfaas::bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The p-th percentile (0..100) of `v`, nearest rank; sorts `v`.
inline double percentile(std::vector<double>& v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

} // namespace prfaas::bench

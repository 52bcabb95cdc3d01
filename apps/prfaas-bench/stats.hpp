#pragma once

// Small helpers for benchmark figures: percentiles and human-readable units.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
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

/// CPU seconds (user + system, all threads) process `pid` has used so far, from
/// /proc/PID/stat (clock-tick resolution); 0 when it cannot be read.
inline double process_cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  std::getline(in, stat);
  // The command name (field 2) may hold spaces: count fields after its ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest{stat.substr(close + 2)};
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::stoull(field);
    if (i == 15)
      stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

} // namespace prfaas::bench

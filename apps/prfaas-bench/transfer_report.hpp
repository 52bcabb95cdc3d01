#pragma once

// prfaas-bench transfer's figures and how they are printed (text, and one JSON line).

#include <cstdint>
#include <optional>
#include <string>

#include "transfer_bench.hpp"

namespace prfaas::bench {

/// CPU seconds and minor faults spent by each side over some runs, and bytes moved.
struct cost {
  double client_cpu_s = 0, server_cpu_s = 0;
  uint64_t client_minflt = 0, server_minflt = 0;
  double bytes = 0;
  double per_gb(double v) const { return bytes > 0 ? v / (bytes / 1e9) : 0; }
};

struct figures {
  double gbps = 0, raw_gbps = 0, raw_hot_gbps = 0;
  double tcp_gbps = 0;     ///< plain TCP from and into distinct warm buffers (the target's)
  double tcp_one_gbps = 0; ///< plain TCP from and into one cache-resident buffer (reference)
  double gbps_pinged = 0;  ///< the data plane while the control plane is pinged
  std::optional<double> iperf_gbps;
  std::string iperf_why;
  double idle_p50_us = 0, idle_p99_us = 0, load_p50_us = 0, load_p99_us = 0;
  uint64_t rtt_samples = 0;
  uint32_t retransmits = 0;
  cost dp_cost, tcp_cost, tcp_one_cost;
  uint64_t server_peak_rss = 0; ///< the most any data-plane run reached
  int counted_runs = 0;         ///< runs whose costs are counted (after the first)
};

/// Prints the figures of one benchmark run; `two_process` names the server's mode.
void print(const transfer_options& o, const figures& f, bool two_process);

} // namespace prfaas::bench

#include "transfer_report.hpp"

#include <algorithm>
#include <cstdio>

#include "prfaas/runtime/config.hpp"

namespace prfaas::bench {

namespace {

void print_costs(const figures& f) {
  auto line = [](const char* what, const cost& c) {
    std::printf("  %-11s CPU s/GB client %5.2f  server %5.2f   minor faults/GB client %8.0f  "
                "server %8.0f\n",
                what, c.per_gb(c.client_cpu_s), c.per_gb(c.server_cpu_s),
                c.per_gb(static_cast<double>(c.client_minflt)),
                c.per_gb(static_cast<double>(c.server_minflt)));
  };
  std::printf("  costs over %d run(s)%s:\n", f.counted_runs,
              f.counted_runs > 1 || f.counted_runs == 0 ? " after the first" : "");
  line("data plane", f.dp_cost);
  line("plain TCP", f.tcp_cost);
  line("TCP, 1 buf", f.tcp_one_cost);
  const double faults = std::max(f.dp_cost.per_gb(static_cast<double>(f.dp_cost.client_minflt)),
                                 f.dp_cost.per_gb(static_cast<double>(f.dp_cost.server_minflt)));
  std::printf("  data-plane minor faults per GB (the larger side) %.0f   [target < 1000: %s]\n",
              faults, faults < 1000 ? "meets target" : "MISSES target");
}

/// The figures as one JSON line.
void print_json(const transfer_options& o, const figures& f, double bytes, uint64_t link_bps) {
  const double ratio = f.tcp_gbps > 0 ? f.gbps / f.tcp_gbps : 0;
  const double raw_ratio = f.raw_gbps > 0 ? f.gbps / f.raw_gbps : 0;
  double u = link_bps > 0 ? f.gbps * 8e9 / static_cast<double>(link_bps) : 0;
  std::printf("{\"bytes\":%.0f,\"chunk_bytes\":%llu,\"connections\":%u,\"gb_per_s\":%.4f,"
              "\"tcp_gb_per_s\":%.4f,\"tcp_one_buffer_gb_per_s\":%.4f,\"iperf3_gbit_per_s\":%.4f,"
              "\"raw_gb_per_s\":%.4f,\"raw_hot_gb_per_s\":%.4f,\"ratio_tcp\":%.4f,"
              "\"ratio_raw\":%.4f,\"retransmits\":%u,"
              "\"dp_minflt_per_gb_client\":%.0f,\"dp_minflt_per_gb_server\":%.0f,"
              "\"dp_cpu_s_per_gb_client\":%.3f,\"dp_cpu_s_per_gb_server\":%.3f,"
              "\"server_peak_rss\":%llu,\"link_rate_bps\":%llu,"
              "\"utilisation\":%.4f,\"rtt_idle_p50_us\":%.1f,\"rtt_idle_p99_us\":%.1f,"
              "\"rtt_load_p50_us\":%.1f,\"rtt_load_p99_us\":%.1f,\"rtt_samples\":%llu}\n",
              bytes, static_cast<unsigned long long>(o.chunk_bytes), o.connections, f.gbps,
              f.tcp_gbps, f.tcp_one_gbps, f.iperf_gbps.value_or(0), f.raw_gbps, f.raw_hot_gbps,
              ratio, raw_ratio, f.retransmits,
              f.dp_cost.per_gb(static_cast<double>(f.dp_cost.client_minflt)),
              f.dp_cost.per_gb(static_cast<double>(f.dp_cost.server_minflt)),
              f.dp_cost.per_gb(f.dp_cost.client_cpu_s), f.dp_cost.per_gb(f.dp_cost.server_cpu_s),
              static_cast<unsigned long long>(f.server_peak_rss),
              static_cast<unsigned long long>(link_bps), u, f.idle_p50_us, f.idle_p99_us,
              f.load_p50_us, f.load_p99_us, static_cast<unsigned long long>(f.rtt_samples));
}

} // namespace

void print(const transfer_options& o, const figures& f, bool two_process) {
  uint64_t n = std::max<uint64_t>(1, o.bytes / o.chunk_bytes);
  double bytes = static_cast<double>(n * o.chunk_bytes);
  double ratio = f.tcp_gbps > 0 ? f.gbps / f.tcp_gbps : 0;
  double raw_ratio = f.raw_gbps > 0 ? f.gbps / f.raw_gbps : 0;
  uint64_t link_bps = o.link_rate.empty() ? 0 : parse_rate(o.link_rate);
  auto verdict = [](bool ok) { return ok ? "meets target" : "MISSES target"; };
  std::printf("transfer benchmark: %s, %.0f MiB in %llu chunks of %llu B, %u connection(s)%s%s, "
              "best of %d, checksums on\n",
              two_process ? "two processes (server at --peer-endpoint)"
                          : "two processes over tcp loopback",
              bytes / (1 << 20), static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(o.chunk_bytes), o.connections,
              o.pace.empty() ? "" : ", paced at ", o.pace.c_str(), o.repeat);
  std::printf("  data plane  %7.3f GB/s  (%7.0f Mbit/s)   [target >= 80%% of plain TCP: %s]\n",
              f.gbps, f.gbps * 8e3, verdict(ratio >= 0.8));
  std::printf(
      "  plain TCP   %7.3f GB/s  (%7.0f Mbit/s)   %u connection(s), chunk-sized writes from %u\n"
      "                                         distinct warm buffers, reads into %u (the "
      "pools')\n",
      f.tcp_gbps, f.tcp_gbps * 8e3, o.connections, o.pool_buffers, o.pool_buffers);
  std::printf(
      "  TCP, 1 buf  %7.3f GB/s  (%7.0f Mbit/s)   reference: every write from one buffer, reads\n"
      "                                         into one per connection (cache-resident)\n",
      f.tcp_one_gbps, f.tcp_one_gbps * 8e3);
  if (f.iperf_gbps)
    std::printf(
        "  iperf3 -P %u %7.3f GB/s  (%7.0f Mbit/s)   reference, 3 s, run before the nodes\n",
        o.connections, *f.iperf_gbps / 8, *f.iperf_gbps * 1e3);
  else
    std::printf("  iperf3      skipped: %s\n", f.iperf_why.c_str());
  std::printf(
      "  raw zmq     %7.3f GB/s  (%7.0f Mbit/s)   one DEALER->ROUTER, the same distinct chunks,\n"
      "                                         held by the receiver until all arrived\n",
      f.raw_gbps, f.raw_gbps * 8e3);
  std::printf(
      "  raw zmq hot %7.3f GB/s  (%7.0f Mbit/s)   one chunk-sized buffer re-sent, dropped on "
      "arrival\n",
      f.raw_hot_gbps, f.raw_hot_gbps * 8e3);
  std::printf(
      "  ratio       %6.0f%% of plain TCP; %.0f%% of TCP, 1 buf; %.0f%% of raw zmq; %.0f%% of "
      "raw zmq hot; chunk re-sends: %u\n",
      100 * ratio, f.tcp_one_gbps > 0 ? 100 * f.gbps / f.tcp_one_gbps : 0.0, 100 * raw_ratio,
      f.raw_hot_gbps > 0 ? 100 * f.gbps / f.raw_hot_gbps : 0.0, f.retransmits);
  print_costs(f);
  const double pools = 2.0 * o.pool_buffers * static_cast<double>(o.chunk_bytes) / (1 << 20);
  // The receiving process also holds the plain-TCP sink's warm buffers (its ring and one
  // per connection), resident from the first baseline run on.
  const double sink = static_cast<double>(o.pool_buffers + o.connections) *
                      static_cast<double>(o.chunk_bytes) / (1 << 20);
  std::printf("  receiver peak RSS during a data-plane transfer %.0f MiB (its pools: %.0f MiB; the "
              "plain-TCP sink's buffers: %.0f MiB)\n",
              static_cast<double>(f.server_peak_rss) / (1 << 20), pools, sink);
  if (link_bps > 0) {
    double u = f.gbps * 8e9 / static_cast<double>(link_bps);
    double ru = f.raw_gbps * 8e9 / static_cast<double>(link_bps);
    std::printf(
        "  link %s: utilisation = achieved/rate = %.1f%% (raw zmq %.1f%%)   [target >= 90%%: %s]\n",
        o.link_rate.c_str(), 100 * u, 100 * ru, verdict(u >= 0.9));
  }
  if (o.rtt) {
    std::printf("  control-plane RTT idle         p50 %8.1f us  p99 %8.1f us\n", f.idle_p50_us,
                f.idle_p99_us);
    std::printf("  control-plane RTT under load   p50 %8.1f us  p99 %8.1f us  (%llu samples)   "
                "[target p99 < 5 ms: %s]\n",
                f.load_p50_us, f.load_p99_us, static_cast<unsigned long long>(f.rtt_samples),
                verdict(f.load_p99_us < 5000));
    std::printf("  (the load: separate data-plane runs at %.3f GB/s while pinged every ~200 us)\n",
                f.gbps_pinged);
  }
  if (o.json)
    print_json(o, f, bytes, link_bps);
}

} // namespace prfaas::bench

#pragma once

// What the data plane is measured against: plain TCP between the same two processes
// (chunk-sized writes from a warm buffer, reads into a warm buffer, no protocol), and
// iperf3 when installed; plus the process figures that explain a gap (CPU time, minor
// page faults, peak RSS).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace prfaas::bench {

/// This process's CPU seconds (user + system) and minor page faults so far.
struct proc_usage {
  double cpu_s = 0;
  uint64_t minflt = 0;
};
proc_usage self_usage();
/// Peak resident set (VmHWM) in bytes; 0 where /proc does not say.
uint64_t peak_rss_bytes();
/// Starts a new peak (Linux: /proc/self/clear_refs "5"); false where refused.
bool reset_peak_rss();

/// The receiving end: accepts connections on host:port; each connection carries
/// transfers of [8-byte length, bytes], read into one warm buffer per connection and
/// answered with one byte once all arrived.
class tcp_sink {
public:
  tcp_sink(const std::string& host, int port, size_t buffer_bytes);
  ~tcp_sink();
  tcp_sink(const tcp_sink&) = delete;
  tcp_sink& operator=(const tcp_sink&) = delete;

private:
  void accept_loop();
  int listen_fd_ = -1;
  size_t buffer_bytes_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> readers_;
  std::vector<int> fds_;
};

/// The sending end: `connections` TCP connections to host:port, kept open.
class tcp_source {
public:
  tcp_source(const std::string& host, int port, uint32_t connections);
  ~tcp_source();
  tcp_source(const tcp_source&) = delete;
  tcp_source& operator=(const tcp_source&) = delete;
  /// Seconds to move `bytes` split evenly over the connections, each written in
  /// `chunk`-sized writes from `warm`, until every connection's sink confirmed.
  double send(uint64_t bytes, const std::vector<std::byte>& warm);

private:
  std::vector<int> fds_;
};

/// iperf3 -P `streams` over loopback for `seconds`: received Gbit/s, or nullopt when
/// iperf3 is not installed or failed (with `why` set).
std::optional<double> iperf3_loopback_gbps(uint32_t streams, int seconds, std::string& why);

} // namespace prfaas::bench

#pragma once

// What the data plane is measured against: plain TCP between the same two processes
// (chunk-sized writes from warm buffers, reads into warm buffers, no protocol), and
// iperf3 when installed; plus the process figures that explain a gap (CPU time, minor
// page faults, peak RSS).
//
// Plain TCP runs two ways. *Distinct* buffers: each chunk is written from the next of
// as many pre-faulted buffers as the data plane's send pool has, and read into the next
// of as many as its receive pool has, so both move the same amount of distinct memory
// and neither pays a page fault. *One* buffer: every chunk is written from one buffer
// and read into one buffer per connection, which stay in the CPU's cache; a bound no
// transfer of distinct KV bytes can reach, printed for reference.

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
/// transfers of [8-byte length, 8-byte mode, bytes], read `buffer_bytes` at a time into
/// one warm buffer per connection (mode 0) or into the next of `ring` warm buffers
/// shared by all connections (mode 1), and answered with one byte once all arrived.
class tcp_sink {
public:
  tcp_sink(const std::string& host, int port, size_t buffer_bytes, size_t ring);
  ~tcp_sink();
  tcp_sink(const tcp_sink&) = delete;
  tcp_sink& operator=(const tcp_sink&) = delete;

private:
  void accept_loop();
  void read_loop(int fd);
  int listen_fd_ = -1;
  size_t buffer_bytes_;
  std::vector<std::vector<std::byte>> ring_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> readers_;
  std::vector<int> fds_;
};

/// The sending end: `connections` TCP connections to host:port, kept open, and `ring`
/// pre-faulted copies of the chunk pattern.
class tcp_source {
public:
  tcp_source(const std::string& host, int port, uint32_t connections,
             const std::vector<std::byte>& pattern, size_t ring);
  ~tcp_source();
  tcp_source(const tcp_source&) = delete;
  tcp_source& operator=(const tcp_source&) = delete;
  /// Seconds to move `bytes` split evenly over the connections in chunk-sized writes
  /// until every connection's sink confirmed: from the next buffer of the ring, read
  /// into the sink's ring (`distinct`), or all from the first buffer, read into one
  /// buffer per connection.
  double send(uint64_t bytes, bool distinct);

private:
  std::vector<int> fds_;
  std::vector<std::vector<std::byte>> ring_;
};

/// iperf3 -P `streams` over loopback for `seconds`: received Gbit/s, or nullopt when
/// iperf3 is not installed or failed (with `why` set).
std::optional<double> iperf3_loopback_gbps(uint32_t streams, int seconds, std::string& why);

} // namespace prfaas::bench

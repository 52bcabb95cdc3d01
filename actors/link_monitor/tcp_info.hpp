#pragma once

// Loss and RTT as the kernel sees them on one TCP socket (Linux TCP_INFO). Optional:
// the data plane's ZeroMQ sockets do not expose their fds, so a monitor reads this
// only from a TCP connection of its own; elsewhere the helper returns nothing.

#include <chrono>
#include <cstdint>
#include <optional>

namespace prfaas::link {

struct tcp_sample {
  uint8_t state = 0;                ///< TCP_ESTABLISHED = 1, ...
  std::chrono::microseconds rtt{0}; ///< kernel's smoothed RTT
  std::chrono::microseconds rtt_var{0};
  uint32_t retransmits_now = 0;   ///< unrecovered RTO timeouts in a row
  uint32_t total_retransmits = 0; ///< segments re-sent over the connection's life
  uint32_t lost = 0;              ///< segments currently deemed lost
  uint32_t unacked = 0;           ///< segments in flight
  uint32_t snd_cwnd = 0;          ///< congestion window, segments
  uint32_t snd_mss = 0;
  std::optional<uint64_t> bytes_acked;   ///< kernels ≥ 4.1
  std::optional<uint64_t> delivery_rate; ///< bytes/s, kernels ≥ 4.9
};

/// TCP_INFO of socket `fd`; nothing when `fd` is not a TCP socket (or not a socket).
std::optional<tcp_sample> read_tcp_info(int fd);

} // namespace prfaas::link

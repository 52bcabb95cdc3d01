#include "link_monitor/tcp_info.hpp"

#include <cstddef>
#include <cstring>

#include <linux/tcp.h> // struct tcp_info with the newer fields (not <netinet/tcp.h>)
#include <netinet/in.h>
#include <sys/socket.h>

namespace prfaas::link {

std::optional<tcp_sample> read_tcp_info(int fd) {
  struct tcp_info ti;
  std::memset(&ti, 0, sizeof ti);
  socklen_t len = sizeof ti;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
    return std::nullopt;
  // An older kernel fills a shorter struct: only trust fields it wrote.
  auto has = [len](size_t end) { return static_cast<size_t>(len) >= end; };
  if (!has(offsetof(struct tcp_info, tcpi_total_retrans) + sizeof ti.tcpi_total_retrans))
    return std::nullopt;
  tcp_sample s;
  s.state = ti.tcpi_state;
  s.rtt = std::chrono::microseconds{ti.tcpi_rtt};
  s.rtt_var = std::chrono::microseconds{ti.tcpi_rttvar};
  s.retransmits_now = ti.tcpi_retransmits;
  s.total_retransmits = ti.tcpi_total_retrans;
  s.lost = ti.tcpi_lost;
  s.unacked = ti.tcpi_unacked;
  s.snd_cwnd = ti.tcpi_snd_cwnd;
  s.snd_mss = ti.tcpi_snd_mss;
  if (has(offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked))
    s.bytes_acked = ti.tcpi_bytes_acked;
  if (has(offsetof(struct tcp_info, tcpi_delivery_rate) + sizeof ti.tcpi_delivery_rate))
    s.delivery_rate = ti.tcpi_delivery_rate;
  return s;
}

} // namespace prfaas::link

// Queue-delay control of the bulk path (delay_control.hpp): every 20 ms, each peer
// with bytes in flight has its bulk connections sampled through TCP_INFO (smoothed and
// minimum RTT, bytes acknowledged) and the controller's rate set on them as the
// kernel's pacing rate (SO_MAX_PACING_RATE, shared evenly between the connections).
// A peer idle for a second goes back to unpaced.

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <limits>

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

namespace {

constexpr auto sample_every = std::chrono::milliseconds(20);
constexpr auto idle_reset = std::chrono::seconds(1);

/// Bytes/s on each connection; 0 = unpaced (the kernel's "no limit").
void set_pacing(const std::vector<bulk_out>& bulk, double rate_bps) {
  uint64_t per_conn = std::numeric_limits<uint64_t>::max();
  if (rate_bps > 0)
    per_conn = std::max<uint64_t>(
        1, static_cast<uint64_t>(rate_bps / 8.0 / static_cast<double>(bulk.size())));
  for (const auto& b : bulk)
    if (b.fd >= 0)
      ::setsockopt(b.fd, SOL_SOCKET, SO_MAX_PACING_RATE, &per_conn, sizeof per_conn);
}

} // namespace

void zmq_data_plane_impl::control_delay(dp_clock::time_point now) {
  if (cfg_.queue_delay_target <= dp_clock::duration::zero())
    return; // off: the sockets keep the kernel's defaults
  for (auto& [_, pp] : peers_) {
    auto& p = *pp;
    if (p.bulk.empty() || now - p.delay_at < sample_every)
      continue;
    if (p.pacing_gauge == nullptr) {
      prometheus::Labels lbl{{"peer", p.name}};
      p.pacing_gauge = &metrics_.gauge(
          "prfaas_data_pacing_bps",
          "Pacing rate the queue-delay control set on the bulk connections (0: unpaced)", lbl);
      p.queue_delay_gauge = &metrics_.gauge(
          "prfaas_data_queue_delay_seconds",
          "Queueing delay on the path to the peer: smoothed RTT over min RTT, worst connection",
          lbl);
    }
    const double dt = std::chrono::duration<double>(now - p.delay_at).count();
    const bool first = p.delay_at == dp_clock::time_point{};
    p.delay_at = now;
    delay_sample s;
    s.connections = static_cast<uint32_t>(p.bulk.size());
    s.interval_s = first ? 0 : dt;
    uint64_t acked = 0;
    for (const auto& b : p.bulk) {
      tcp_info ti{};
      socklen_t len = sizeof ti;
      if (b.fd < 0 || ::getsockopt(b.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        continue;
      acked += ti.tcpi_bytes_acked;
      if (ti.tcpi_min_rtt > 0 && ti.tcpi_rtt > ti.tcpi_min_rtt)
        s.queue_delay_s = std::max(s.queue_delay_s, (ti.tcpi_rtt - ti.tcpi_min_rtt) / 1e6);
    }
    // A connection replaced since the last sample starts its count again.
    if (!first && acked >= p.delay_acked)
      s.delivered_bps = static_cast<double>(acked - p.delay_acked) * 8.0 / dt;
    p.delay_acked = acked;
    if (p.report.bytes_in_flight > 0)
      p.busy_at = now;
    if (p.report.bytes_in_flight == 0) {
      // Idle: the RTTs are old news. A second of it and the next transfer starts unpaced.
      if (p.delay_paced && now - p.busy_at >= idle_reset) {
        p.delay.reset();
        set_pacing(p.bulk, 0);
        p.delay_paced = false;
        p.pacing_gauge->Set(0);
      }
      continue;
    }
    p.queue_delay_gauge->Set(s.queue_delay_s);
    const double rate = p.delay.on_sample(s);
    if (rate > 0 || p.delay_paced) {
      set_pacing(p.bulk, rate); // every sample: a reconnected socket gets it too
      p.delay_paced = rate > 0;
      p.pacing_gauge->Set(rate);
    }
  }
}

} // namespace prfaas::detail

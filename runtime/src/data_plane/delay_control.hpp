#pragma once

// Delay-based rate control of a peer's bulk connections: the data plane keeps the
// queue it builds on the path short, so that control messages sharing the link
// (heartbeats, requests, probes) do not wait behind KV bytes or get tail-dropped.
//
// `links[].rate` paces to what the operator declared; a link can be slower than that
// (a shared WAN, a rate cut, a misconfiguration) or undeclared. Then TCP fills the
// bottleneck's queue until it drops: on a tbf link at 100 Mbit/s, unpaced, control
// round trips under a transfer were p50 13-17 ms and p99 37-38 ms, and at a few Mbit/s
// heartbeats were delayed past the failure detector's timeout.
//
// The signal is the kernel's own: each connection's smoothed RTT over its minimum RTT
// (TCP_INFO), the time its packets spend queued on the path.
//  * Unpaced at first. Three samples in a row over the target engage pacing at 90% of
//    the delivery rate; a passing spike (a busy CPU on loopback) does not.
//  * Over the target: the rate goes to the delivery rate (smoothed over ~100 ms) times
//    1 - excess/100 ms (between 0.5 and 0.97), so the excess queue drains within the
//    100 ms that follow, during which no other cut is made (the smoothed RTT lags).
//  * Under it: the rate grows 2% a sample while the queue is under a quarter of the
//    target, else 1%, but not past 1.05 x the delivery rate: above that the cap stops
//    binding and TCP's own probing (BBR's 1.25x gain, CUBIC's growth) refills the queue.
//  * The target grows by three packet gaps per connection at the current rate: a
//    receiver's delayed ACK waits for a second packet, which at low per-connection
//    rates reads as queueing that is not there.
// The rate is applied per connection as the kernel's pacing rate (SO_MAX_PACING_RATE),
// so packets leave evenly, not in chunk-sized bursts.
//
// Plain arithmetic, no clock: samples carry their interval, so tests drive it directly.

#include <cstdint>

namespace prfaas::detail {

struct delay_sample {
  double queue_delay_s = 0; ///< max over the connections of (smoothed RTT - min RTT)
  double delivered_bps = 0; ///< bits acknowledged per second over the interval, all connections
  uint32_t connections = 1; ///< bulk connections sharing the rate
  double interval_s = 0.02; ///< since the previous sample
};

class delay_control {
public:
  /// `target_s` 0 turns the controller off (never paces).
  explicit delay_control(double target_s, double floor_bps = 1e6)
      : target_s_(target_s), floor_bps_(floor_bps) {}

  /// One sample; returns the pacing rate to apply in bits/s (0 = unpaced).
  double on_sample(const delay_sample& s);
  /// The link went idle: back to unpaced (the next transfer starts at full speed).
  void reset() {
    rate_bps_ = 0;
    delivered_bps_ = 0;
    hold_s_ = 0;
    over_ = 0;
  }

  double rate_bps() const { return rate_bps_; }
  /// The queueing delay the controller aims under at the current rate.
  double effective_target_s(uint32_t connections) const;

private:
  double target_s_;
  double floor_bps_;
  double rate_bps_ = 0;      ///< 0: unpaced
  double delivered_bps_ = 0; ///< smoothed (EWMA over ~100 ms): ACKs come in lumps
  double hold_s_ = 0;        ///< after a cut, no other until the queue could drain
  uint32_t over_ = 0;        ///< samples in a row over the target
};

} // namespace prfaas::detail

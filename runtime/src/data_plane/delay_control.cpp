#include "delay_control.hpp"

#include <algorithm>

namespace prfaas::detail {

namespace {

constexpr double packet_bits = 1500.0 * 8.0;
constexpr double fast_probe = 1.02; ///< rate growth per sample, queue under a quarter of the target
constexpr double slow_probe = 1.01; ///< rate growth per sample, queue under the target
constexpr double engage = 0.9;      ///< first pacing: this much of what was delivered
constexpr double deepest_cut = 0.5; ///< at most halved per cut
constexpr double shallowest_cut = 0.97; ///< just over the target
constexpr double headroom = 1.05;       ///< the rate probes up to this much over the delivery rate
constexpr double hold_after_cut_s = 0.1;
constexpr uint32_t engage_after = 3; ///< samples over the target in a row before pacing
constexpr double delivered_smoothing_s = 0.1;

} // namespace

double delay_control::effective_target_s(uint32_t connections) const {
  if (rate_bps_ <= 0)
    return target_s_;
  const double per_conn = rate_bps_ / std::max<uint32_t>(connections, 1);
  return target_s_ + 3.0 * packet_bits / per_conn;
}

double delay_control::on_sample(const delay_sample& s) {
  if (target_s_ <= 0)
    return 0;
  const double a = std::clamp(s.interval_s / delivered_smoothing_s, 0.0, 1.0);
  delivered_bps_ =
      delivered_bps_ <= 0 ? s.delivered_bps : (1 - a) * delivered_bps_ + a * s.delivered_bps;
  hold_s_ = std::max(0.0, hold_s_ - s.interval_s);
  const double target = effective_target_s(s.connections);
  over_ = s.queue_delay_s > target ? over_ + 1 : 0;
  if (rate_bps_ <= 0 && over_ < engage_after)
    return 0; // a passing spike (a busy CPU on loopback) is not a queue on the path
  if (s.queue_delay_s > target) {
    if (hold_s_ > 0)
      return rate_bps_; // the last cut has not shown in the smoothed RTT yet
    // Just under what the path delivered: the queue drains at the difference.
    double base = delivered_bps_ > 0 ? delivered_bps_ : rate_bps_;
    if (rate_bps_ > 0)
      base = std::min(base, rate_bps_);
    if (base <= 0)
      return rate_bps_; // nothing delivered yet and never paced: no basis for a rate
    // The queue's excess drains within the hold at the difference to the delivery rate.
    const double drain = std::clamp(1.0 - (s.queue_delay_s - target) / hold_after_cut_s,
                                    deepest_cut, shallowest_cut);
    rate_bps_ = std::max(floor_bps_, base * (rate_bps_ > 0 ? drain : engage));
    hold_s_ = hold_after_cut_s;
  } else if (rate_bps_ > 0) {
    // Up, but not far past what is delivered: above it the cap stops binding, and
    // TCP's own probing (BBR's 1.25x, CUBIC's growth) would fill the queue unchecked.
    const double grown = rate_bps_ * (s.queue_delay_s < target / 4 ? fast_probe : slow_probe);
    rate_bps_ = std::max(rate_bps_, std::min(grown, headroom * delivered_bps_));
  }
  return rate_bps_;
}

} // namespace prfaas::detail

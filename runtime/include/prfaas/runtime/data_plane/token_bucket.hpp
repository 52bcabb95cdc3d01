#pragma once

// Pacing for the data plane: a token bucket in bytes, refilled at a fixed rate.
// A send is allowed while the bucket is not in debt; the send then takes its whole
// size (possibly into debt), so chunks larger than the burst still pass and the
// long-run rate is exact. Time is passed in, so tests drive it directly.

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace prfaas {

class token_bucket {
public:
  using clock = std::chrono::steady_clock;

  /// `rate_bps` in bits/s (0 = unlimited); `burst_bytes` is the most that can
  /// accumulate while idle.
  token_bucket(uint64_t rate_bps, uint64_t burst_bytes, clock::time_point now)
      : bytes_per_s_(static_cast<double>(rate_bps) / 8.0), burst_(static_cast<double>(burst_bytes)),
        tokens_(static_cast<double>(burst_bytes)), last_(now) {}

  bool unlimited() const { return bytes_per_s_ <= 0; }

  /// True when a send may start now.
  bool ready(clock::time_point now) {
    refill(now);
    return unlimited() || tokens_ >= 0;
  }

  /// Accounts a send of `bytes` (call after `ready`).
  void take(uint64_t bytes) {
    if (!unlimited())
      tokens_ -= static_cast<double>(bytes);
  }

  /// How long until `ready` becomes true (zero when it already is).
  clock::duration wait(clock::time_point now) {
    refill(now);
    if (unlimited() || tokens_ >= 0)
      return clock::duration{0};
    // Rounded up, so that waiting this long always makes the bucket ready.
    return std::chrono::ceil<clock::duration>(
        std::chrono::duration<double>(-tokens_ / bytes_per_s_));
  }

private:
  void refill(clock::time_point now) {
    if (now <= last_)
      return;
    tokens_ = std::min(burst_,
                       tokens_ + std::chrono::duration<double>(now - last_).count() * bytes_per_s_);
    last_ = now;
  }

  double bytes_per_s_;
  double burst_;
  double tokens_;
  clock::time_point last_;
};

} // namespace prfaas

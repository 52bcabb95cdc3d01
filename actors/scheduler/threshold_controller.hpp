#pragma once

// The short-term controller of the prfaas policy (paper §3.4.3; DESIGN.md §5): while
// PrfaaS egress is *scarce*, re-search the offload threshold t so that what the
// requests of the recent past would send over the link fits in what the link
// delivers now; when bandwidth is abundant again, go back to the planned t.
//
// The search is the bandwidth term of Eq. 3 on the observed traffic instead of a
// parametric law: over the requests of the last `window` (their uncached lengths l),
//     egress(t) = Σ_{l > t} kv_bytes(l) · 8 / window_span
// and t is the smallest observed length with egress(t) ≤ target × usable bandwidth.
// Usable bandwidth is the measured throughput while the link is backed up (it is
// the bottleneck, e.g. a `tc tbf` rate below the configured one), else its capacity.
//
// No flapping: within a scarce episode t only rises, and at most once per
// `retune_interval`; once abundant it halves back toward the planned t, again at most
// once per `retune_interval`; the scarce/abundant switch itself has hysteresis
// (bandwidth_mode). t never leaves [planned, max]. Only a link under pressure moves t:
// a PrfaaS queue that is full while the link is idle is not a bandwidth problem (the
// policy calls it scarce for cache judgement, but feeds this controller "abundant").

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace prfaas::serving {

class threshold_controller {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::nanoseconds;

  struct settings {
    uint64_t planned = 4096;           ///< t when bandwidth is abundant (the planner's)
    uint64_t max = 1u << 20;           ///< t never rises above this
    double target_utilisation = 0.8;   ///< of the usable bandwidth
    duration window = std::chrono::seconds(30);
    duration retune_interval = std::chrono::seconds(2);
    size_t max_samples = 8192;         ///< oldest samples go first beyond this
  };

  /// What the link looks like now (from the link monitors).
  struct link_signals {
    double capacity_bps = 0;   ///< configured rate; 0 = unknown
    double throughput_bps = 0; ///< measured, acknowledged
    uint64_t backlog_bytes = 0;
  };

  using kv_bytes_fn = std::function<double(uint64_t tokens)>;

  threshold_controller(settings s, kv_bytes_fn kv_bytes);

  /// One routed request's uncached length (what is compared with t).
  void observe(time_point now, uint64_t uncached_tokens);

  /// Feeds the mode and link; re-searches t when due. Returns the current t.
  uint64_t update(time_point now, bool scarce, const link_signals& link);

  uint64_t threshold() const { return t_; }
  /// Times t was re-searched (a rare path worth a metric).
  uint64_t retunes() const { return retunes_; }
  const settings& config() const { return s_; }

  /// The smallest threshold in [planned, max] whose egress over `lengths` (uncached
  /// lengths seen over `span_seconds`) fits in `budget_bps`; `max` when none does.
  static uint64_t search(std::vector<uint64_t> lengths, double span_seconds, double budget_bps,
                         const kv_bytes_fn& kv_bytes, uint64_t planned, uint64_t max);

private:
  void expire(time_point now);

  settings s_;
  kv_bytes_fn kv_bytes_;
  std::deque<std::pair<time_point, uint64_t>> samples_; ///< (arrival, uncached length)
  uint64_t t_;
  bool scarce_ = false;
  time_point last_retune_{};
  uint64_t retunes_ = 0;
};

} // namespace prfaas::serving

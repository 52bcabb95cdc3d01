#pragma once

// What a link monitor measures, as plain classes fed with samples and the time they
// were taken (the actor clock: steady or virtual), so they are unit-tested with
// synthetic series:
//  * rtt_estimator — smoothed RTT and its variation (RFC 6298 gains) plus a windowed
//    minimum, the propagation-delay estimate that queueing does not inflate;
//  * probe_window — which of the last N probes were answered: loss ratio, misses in a
//    row, when the peer last answered;
//  * throughput_estimator — acknowledged throughput and re-send rate from successive
//    data-plane snapshots (counter deltas over time, smoothed), and the backlog.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace prfaas::link {

using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using duration = std::chrono::nanoseconds;

class rtt_estimator {
public:
  /// `alpha`, `beta`: EWMA gains of the mean and the variation; `min_window`: how far
  /// back the minimum looks.
  explicit rtt_estimator(double alpha = 0.125, double beta = 0.25,
                         duration min_window = std::chrono::seconds(10));

  void add(duration sample, time_point now);

  bool empty() const { return samples_ == 0; }
  duration smoothed() const { return duration{static_cast<int64_t>(srtt_)}; }
  duration variation() const { return duration{static_cast<int64_t>(rttvar_)}; }
  /// Smallest sample taken within `min_window` of the latest one.
  duration min() const { return mins_.empty() ? duration{0} : mins_.front().second; }
  duration last() const { return last_; }
  uint64_t samples() const { return samples_; }

private:
  double alpha_, beta_;
  duration window_;
  double srtt_ = 0, rttvar_ = 0;
  duration last_{0};
  uint64_t samples_ = 0;
  std::deque<std::pair<time_point, duration>> mins_; ///< increasing values, by time
};

class probe_window {
public:
  explicit probe_window(size_t size = 10);

  void answered(time_point now);
  void lost();
  /// Forgets the outcomes (not when the peer last answered): e.g. once the link was
  /// declared down, recovery is judged on fresh probes only.
  void clear();

  size_t size() const { return outcomes_.size(); }
  size_t capacity() const { return size_; }
  /// Unanswered fraction of the probes in the window; 0 when empty.
  double loss() const;
  uint32_t misses_in_a_row() const { return misses_; }
  std::optional<time_point> last_answer() const { return last_answer_; }

private:
  size_t size_;
  std::deque<bool> outcomes_; ///< true = answered; oldest first
  size_t lost_ = 0;
  uint32_t misses_ = 0;
  std::optional<time_point> last_answer_;
};

/// Cumulative counters of the data plane toward one peer cluster.
struct link_counters {
  uint64_t bytes_acked = 0;
  uint64_t retransmits = 0;
  uint64_t backlog_bytes = 0; ///< queued (waiting for credit or pacing) + in flight
};

class throughput_estimator {
public:
  /// `alpha`: EWMA gain per snapshot.
  explicit throughput_estimator(double alpha = 0.3);

  /// A snapshot taken at `now`. Counters that went backwards (the data plane was
  /// restarted, or a peer left the set) start a new baseline without a sample.
  void add(const link_counters& c, time_point now);

  bool has_rate() const { return rates_ > 0; }
  double throughput_bps() const { return throughput_; }
  double retransmit_rate() const { return retransmit_rate_; } ///< re-sends per second
  uint64_t backlog_bytes() const { return last_ ? last_->backlog_bytes : 0; }
  uint64_t retransmits() const { return last_ ? last_->retransmits : 0; }

private:
  double alpha_;
  std::optional<link_counters> last_;
  time_point last_at_{};
  double throughput_ = 0, retransmit_rate_ = 0;
  uint64_t rates_ = 0;
};

} // namespace prfaas::link

#pragma once

// A link's state — up, degraded, down — judged from its signals with hysteresis, so
// that it never flaps:
//  * classify() maps the signals to a target state; entering `degraded` takes a
//    signal at or above its threshold, leaving it takes every signal below
//    `recover_ratio` × its threshold (threshold hysteresis);
//  * link_state_machine moves to the target only once it has been wanted without
//    interruption for a dwell time: `degrade_dwell` to get worse, `recover_dwell`
//    to get better (time hysteresis). `down` is taken at once: the `down_after`
//    bound that produced it is already a time bound.
// Plain classes; time comes in as arguments.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "link_monitor/estimators.hpp"

namespace prfaas::link {

/// Values as in link.proto's Condition.
enum class condition : uint8_t { unknown = 0, up = 1, degraded = 2, down = 3 };
const char* to_string(condition);

struct thresholds {
  duration down_after = std::chrono::seconds(2); ///< no probe answered this long → down
  uint32_t degraded_misses = 2;   ///< probes unanswered in a row → degraded (0 = off)
  double loss_degraded = 0.3;     ///< probe loss over the window → degraded (0 = off)
  size_t loss_min_probes = 5;     ///< probes in the window before loss counts
  duration rtt_degraded{0};       ///< smoothed RTT above → degraded (0 = off)
  double retransmit_degraded = 0; ///< data-plane re-sends per second above → degraded (0 = off)
  duration backlog_degraded{0}; ///< backlog / capacity (queueing delay) above → degraded (0 = off)
  double recover_ratio = 0.5;   ///< leave degraded below ratio × each threshold
  duration degrade_dwell{0};    ///< a worse state must be wanted this long
  duration recover_dwell = std::chrono::seconds(2); ///< a better state must be wanted this long
};

/// What the monitor knows at one evaluation.
struct link_signals {
  bool reachable = true; ///< a probe was answered within down_after
  uint32_t misses_in_a_row = 0;
  double probe_loss = 0;
  size_t probes = 0;           ///< in the loss window
  std::optional<duration> rtt; ///< smoothed, once measured
  double retransmit_rate = 0;
  std::optional<duration> queue_delay; ///< backlog drained at capacity; none without capacity
};

struct verdict {
  condition target = condition::unknown;
  std::string reason; ///< the signal that decided: "ok", "unreachable", "probe_misses", ...
};

/// The state the signals call for, given the current one (for threshold hysteresis).
verdict classify(const link_signals& s, condition current, const thresholds& t);

class link_state_machine {
public:
  link_state_machine(duration degrade_dwell, duration recover_dwell);

  /// Feeds the state wanted now; true when the state changed. The first known target
  /// is taken at once (nothing to be hysteretic about yet).
  bool update(const verdict& v, time_point now);

  condition state() const { return state_; }
  time_point since() const { return since_; }
  const std::string& reason() const { return reason_; }
  uint64_t transitions() const { return transitions_; }

private:
  void move(const verdict& v, time_point now);

  duration degrade_dwell_, recover_dwell_;
  condition state_ = condition::unknown;
  time_point since_{};
  std::string reason_ = "not_measured";
  int pending_dir_ = 0; ///< +1 getting worse, -1 getting better, 0 none
  time_point pending_since_{};
  uint64_t transitions_ = 0;
};

} // namespace prfaas::link

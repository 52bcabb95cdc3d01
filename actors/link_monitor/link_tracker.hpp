#pragma once

// Everything one end of a link knows, put together: probe outcomes and data-plane
// snapshots in, a state with hysteresis out. The link_monitor actor only feeds it
// (probe answers and losses, data-plane counters) and publishes what it says, so the
// whole judgement is unit-tested with synthetic series.
//
// Recovery from `down` is judged on fresh probes: the window of probe outcomes is
// emptied when the link goes down and while it stays down (the losses that took it
// down say nothing about the link once probes are answered again).

#include "link_monitor/estimators.hpp"
#include "link_monitor/link_state.hpp"

namespace prfaas::link {

class link_tracker {
public:
  /// `start`: when monitoring began; a link never answered is down `down_after` later.
  link_tracker(thresholds t, size_t probe_window_size, double capacity_bps, time_point start);

  void answered(duration rtt, time_point now);
  void lost();
  void traffic(const link_counters& c, time_point now);

  /// Judges the link at `now`; true when its state changed.
  bool evaluate(time_point now);

  condition state() const { return machine_.state(); }
  /// When the current state began (`start` while unknown).
  time_point since() const;
  const std::string& reason() const { return machine_.reason(); }
  uint64_t transitions() const { return machine_.transitions(); }
  link_signals signals(time_point now) const;

  const rtt_estimator& rtt() const { return rtt_; }
  const probe_window& probes() const { return window_; }
  const throughput_estimator& throughput() const { return throughput_; }
  double capacity_bps() const { return capacity_; }
  /// throughput / capacity; 0 without a capacity.
  double utilisation() const;

private:
  thresholds t_;
  double capacity_;
  time_point start_;
  rtt_estimator rtt_;
  probe_window window_;
  throughput_estimator throughput_;
  link_state_machine machine_;
};

} // namespace prfaas::link

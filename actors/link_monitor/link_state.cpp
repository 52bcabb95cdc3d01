#include "link_monitor/link_state.hpp"

namespace prfaas::link {

const char* to_string(condition c) {
  switch (c) {
  case condition::unknown:
    return "unknown";
  case condition::up:
    return "up";
  case condition::degraded:
    return "degraded";
  case condition::down:
    return "down";
  }
  return "?";
}

verdict classify(const link_signals& s, condition current, const thresholds& t) {
  if (!s.reachable)
    return {condition::down, "unreachable"};
  // Already degraded: every signal must fall clearly below its threshold to leave.
  const double k = current == condition::degraded ? t.recover_ratio : 1.0;
  auto above = [k](double value, double threshold) {
    return threshold > 0 && value >= threshold * k;
  };
  auto secs = [](duration d) { return std::chrono::duration<double>(d).count(); };
  if (t.degraded_misses > 0 && s.misses_in_a_row >= t.degraded_misses)
    return {condition::degraded, "probe_misses"};
  if (s.probes >= t.loss_min_probes && above(s.probe_loss, t.loss_degraded))
    return {condition::degraded, "probe_loss"};
  if (s.rtt && above(secs(*s.rtt), secs(t.rtt_degraded)))
    return {condition::degraded, "rtt"};
  if (above(s.retransmit_rate, t.retransmit_degraded))
    return {condition::degraded, "retransmits"};
  if (s.queue_delay && above(secs(*s.queue_delay), secs(t.backlog_degraded)))
    return {condition::degraded, "backlog"};
  return {condition::up, "ok"};
}

link_state_machine::link_state_machine(duration degrade_dwell, duration recover_dwell)
    : degrade_dwell_(degrade_dwell), recover_dwell_(recover_dwell) {}

void link_state_machine::move(const verdict& v, time_point now) {
  state_ = v.target;
  reason_ = v.reason;
  since_ = now;
  pending_dir_ = 0;
  ++transitions_;
}

bool link_state_machine::update(const verdict& v, time_point now) {
  if (v.target == condition::unknown)
    return false;
  if (v.target == state_) { // wanted again: any pending move is interrupted
    pending_dir_ = 0;
    reason_ = v.reason;
    return false;
  }
  if (state_ == condition::unknown || v.target == condition::down) {
    move(v, now);
    return true;
  }
  const int dir = v.target > state_ ? 1 : -1;
  if (pending_dir_ != dir) {
    pending_dir_ = dir;
    pending_since_ = now;
  }
  if (now - pending_since_ < (dir > 0 ? degrade_dwell_ : recover_dwell_))
    return false;
  move(v, now);
  return true;
}

} // namespace prfaas::link

#include "link_monitor/link_tracker.hpp"

namespace prfaas::link {

link_tracker::link_tracker(thresholds t, size_t probe_window_size, double capacity_bps,
                           time_point start)
    : t_(t), capacity_(capacity_bps), start_(start), window_(probe_window_size),
      machine_(t.degrade_dwell, t.recover_dwell) {}

void link_tracker::answered(duration rtt, time_point now) {
  if (machine_.state() == condition::down)
    window_.clear();
  rtt_.add(rtt, now);
  window_.answered(now);
}

void link_tracker::lost() {
  if (machine_.state() == condition::down)
    return; // already down: losses carry no news, and must not weigh on recovery
  window_.lost();
}

void link_tracker::traffic(const link_counters& c, time_point now) {
  throughput_.add(c, now);
}

double link_tracker::utilisation() const {
  return capacity_ > 0 ? throughput_.throughput_bps() / capacity_ : 0.0;
}

time_point link_tracker::since() const {
  return machine_.state() == condition::unknown ? start_ : machine_.since();
}

link_signals link_tracker::signals(time_point now) const {
  link_signals s;
  auto last = window_.last_answer();
  s.reachable = now - (last ? *last : start_) < t_.down_after;
  s.misses_in_a_row = window_.misses_in_a_row();
  s.probe_loss = window_.loss();
  s.probes = window_.size();
  if (!rtt_.empty())
    s.rtt = rtt_.smoothed();
  s.retransmit_rate = throughput_.retransmit_rate();
  if (capacity_ > 0)
    s.queue_delay = std::chrono::duration_cast<duration>(std::chrono::duration<double>(
        static_cast<double>(throughput_.backlog_bytes()) * 8.0 / capacity_));
  return s;
}

bool link_tracker::evaluate(time_point now) {
  auto s = signals(now);
  if (!window_.last_answer() && s.reachable)
    return false; // never answered, but the bound has not passed: stay unknown
  if (!machine_.update(classify(s, machine_.state(), t_), now))
    return false;
  if (machine_.state() == condition::down)
    window_.clear();
  return true;
}

} // namespace prfaas::link

#include "link_monitor/estimators.hpp"

#include <cmath>
#include <stdexcept>

namespace prfaas::link {

rtt_estimator::rtt_estimator(double alpha, double beta, duration min_window)
    : alpha_(alpha), beta_(beta), window_(min_window) {
  if (!(alpha > 0 && alpha <= 1) || !(beta > 0 && beta <= 1))
    throw std::invalid_argument("rtt_estimator: gains must be in (0, 1]");
}

void rtt_estimator::add(duration sample, time_point now) {
  const auto s = static_cast<double>(sample.count());
  if (samples_ == 0) {
    srtt_ = s;
    rttvar_ = s / 2;
  } else {
    rttvar_ = (1 - beta_) * rttvar_ + beta_ * std::abs(srtt_ - s);
    srtt_ = (1 - alpha_) * srtt_ + alpha_ * s;
  }
  ++samples_;
  last_ = sample;
  // Monotonic deque: the front is the minimum of the window.
  while (!mins_.empty() && mins_.back().second >= sample)
    mins_.pop_back();
  mins_.emplace_back(now, sample);
  while (mins_.front().first + window_ < now)
    mins_.pop_front();
}

probe_window::probe_window(size_t size) : size_(size) {
  if (size_ == 0)
    throw std::invalid_argument("probe_window: size must be at least 1");
}

void probe_window::answered(time_point now) {
  outcomes_.push_back(true);
  misses_ = 0;
  if (!last_answer_ || *last_answer_ < now)
    last_answer_ = now;
  if (outcomes_.size() > size_) {
    lost_ -= outcomes_.front() ? 0 : 1;
    outcomes_.pop_front();
  }
}

void probe_window::lost() {
  outcomes_.push_back(false);
  ++lost_;
  ++misses_;
  if (outcomes_.size() > size_) {
    lost_ -= outcomes_.front() ? 0 : 1;
    outcomes_.pop_front();
  }
}

void probe_window::clear() {
  outcomes_.clear();
  lost_ = 0;
  misses_ = 0;
}

double probe_window::loss() const {
  return outcomes_.empty() ? 0.0
                           : static_cast<double>(lost_) / static_cast<double>(outcomes_.size());
}

throughput_estimator::throughput_estimator(double alpha) : alpha_(alpha) {
  if (!(alpha > 0 && alpha <= 1))
    throw std::invalid_argument("throughput_estimator: gain must be in (0, 1]");
}

void throughput_estimator::add(const link_counters& c, time_point now) {
  if (!last_ || c.bytes_acked < last_->bytes_acked || c.retransmits < last_->retransmits) {
    last_ = c; // first snapshot, or counters reset: a new baseline
    last_at_ = now;
    return;
  }
  const double dt = std::chrono::duration<double>(now - last_at_).count();
  if (dt <= 0) {
    last_->backlog_bytes = c.backlog_bytes;
    return;
  }
  const double bps = static_cast<double>(c.bytes_acked - last_->bytes_acked) * 8.0 / dt;
  const double rps = static_cast<double>(c.retransmits - last_->retransmits) / dt;
  if (rates_ == 0) {
    throughput_ = bps;
    retransmit_rate_ = rps;
  } else {
    throughput_ = (1 - alpha_) * throughput_ + alpha_ * bps;
    retransmit_rate_ = (1 - alpha_) * retransmit_rate_ + alpha_ * rps;
  }
  ++rates_;
  last_ = c;
  last_at_ = now;
}

} // namespace prfaas::link

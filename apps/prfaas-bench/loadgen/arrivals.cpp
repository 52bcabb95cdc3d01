#include "loadgen/arrivals.hpp"

#include <cmath>
#include <stdexcept>

namespace prfaas::loadgen {

arrival_kind parse_arrival_kind(const std::string& name) {
  if (name == "poisson")
    return arrival_kind::poisson;
  if (name == "bursty")
    return arrival_kind::bursty;
  if (name == "mmpp")
    return arrival_kind::mmpp;
  if (name == "closed")
    return arrival_kind::closed;
  throw std::invalid_argument("unknown arrival process '" + name +
                              "' (poisson, bursty, mmpp, closed)");
}

std::string to_string(arrival_kind k) {
  switch (k) {
  case arrival_kind::poisson:
    return "poisson";
  case arrival_kind::bursty:
    return "bursty";
  case arrival_kind::mmpp:
    return "mmpp";
  case arrival_kind::closed:
    return "closed";
  }
  return "?";
}

double arrival_config::mean_rate() const {
  switch (kind) {
  case arrival_kind::poisson:
    return rate;
  case arrival_kind::bursty:
    return rate * burst_on_s / (burst_on_s + burst_off_s);
  case arrival_kind::mmpp:
    // Stationary share of each state is proportional to its mean dwell.
    return (mmpp_rate[0] * mmpp_dwell_s[0] + mmpp_rate[1] * mmpp_dwell_s[1]) /
           (mmpp_dwell_s[0] + mmpp_dwell_s[1]);
  case arrival_kind::closed:
    return 0;
  }
  return 0;
}

void arrival_config::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  switch (kind) {
  case arrival_kind::poisson:
    if (!(rate > 0))
      bad("--rate must be > 0");
    break;
  case arrival_kind::bursty:
    if (!(rate > 0))
      bad("--rate (the rate during a burst) must be > 0");
    if (!(burst_on_s > 0) || !(burst_off_s >= 0))
      bad("--burst-on must be > 0 and --burst-off >= 0");
    break;
  case arrival_kind::mmpp:
    if (!(mmpp_rate[0] >= 0) || !(mmpp_rate[1] >= 0) || mmpp_rate[0] + mmpp_rate[1] <= 0)
      bad("--mmpp-rates must be >= 0 and not both 0");
    if (!(mmpp_dwell_s[0] > 0) || !(mmpp_dwell_s[1] > 0))
      bad("--mmpp-dwell must be > 0");
    break;
  case arrival_kind::closed:
    if (concurrency == 0)
      bad("--concurrency must be >= 1");
    break;
  }
}

on_off_arrivals::on_off_arrivals(double rate, double on_s, double off_s)
    : gap_(rate), on_s_(on_s), off_s_(off_s) {}

double on_off_arrivals::next(std::mt19937_64& rng) {
  // Poisson in "burst time", then mapped onto the wall clock; exact because the
  // exponential gaps are memoryless across the idle periods.
  active_ += gap_(rng);
  double bursts = std::floor(active_ / on_s_);
  return bursts * (on_s_ + off_s_) + (active_ - bursts * on_s_);
}

mmpp2_arrivals::mmpp2_arrivals(const double (&rate)[2], const double (&dwell_s)[2])
    : rate_{rate[0], rate[1]}, dwell_s_{dwell_s[0], dwell_s[1]} {}

double mmpp2_arrivals::next(std::mt19937_64& rng) {
  auto expo = [&](double mean_or_rate, bool is_rate) {
    return std::exponential_distribution<double>{is_rate ? mean_or_rate : 1 / mean_or_rate}(rng);
  };
  if (left_ < 0)
    left_ = expo(dwell_s_[state_], false);
  for (;;) {
    if (rate_[state_] > 0) {
      double gap = expo(rate_[state_], true);
      if (gap < left_) {
        left_ -= gap;
        return t_ += gap;
      }
    }
    t_ += left_;
    state_ = 1 - state_;
    left_ = expo(dwell_s_[state_], false);
  }
}

std::unique_ptr<arrival_process> make_arrivals(const arrival_config& c) {
  switch (c.kind) {
  case arrival_kind::poisson:
    return std::make_unique<poisson_arrivals>(c.rate);
  case arrival_kind::bursty:
    return std::make_unique<on_off_arrivals>(c.rate, c.burst_on_s, c.burst_off_s);
  case arrival_kind::mmpp:
    return std::make_unique<mmpp2_arrivals>(c.mmpp_rate, c.mmpp_dwell_s);
  case arrival_kind::closed:
    return nullptr;
  }
  return nullptr;
}

} // namespace prfaas::loadgen

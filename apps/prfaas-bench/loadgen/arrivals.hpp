#pragma once

// Open-loop arrival processes: each yields increasing arrival times (seconds from the
// start of the run), drawing only from the engine it is handed.

#include <memory>
#include <random>
#include <string>

namespace prfaas::loadgen {

/// How requests arrive. `closed` has no arrival times: N streams each send their next
/// request when the previous one ends.
enum class arrival_kind { poisson, bursty, mmpp, closed };

arrival_kind parse_arrival_kind(const std::string& name); ///< throws std::invalid_argument
std::string to_string(arrival_kind k);

/// Settings of every kind; each kind reads its own.
struct arrival_config {
  arrival_kind kind = arrival_kind::poisson;
  double rate = 1.0;                 ///< req/s: poisson's rate, bursty's rate during a burst
  double burst_on_s = 10;            ///< bursty: length of a burst (seconds)
  double burst_off_s = 10;           ///< bursty: idle gap after each burst (seconds)
  double mmpp_rate[2] = {2.0, 0.5};  ///< mmpp: req/s in state 0 and 1
  double mmpp_dwell_s[2] = {10, 10}; ///< mmpp: mean time in each state (exponential)
  size_t concurrency = 1;            ///< closed: number of streams

  /// Long-run mean arrival rate (req/s); 0 for closed loop.
  double mean_rate() const;
  /// Throws std::invalid_argument naming the option that is out of range.
  void validate() const;
};

/// Arrival times of one open-loop process.
class arrival_process {
public:
  virtual ~arrival_process() = default;
  /// The next arrival time (seconds), never earlier than the previous one.
  virtual double next(std::mt19937_64& rng) = 0;
};

/// Poisson: exponential gaps with mean 1/rate.
class poisson_arrivals : public arrival_process {
public:
  explicit poisson_arrivals(double rate) : gap_(rate) {}
  double next(std::mt19937_64& rng) override { return t_ += gap_(rng); }

private:
  std::exponential_distribution<double> gap_;
  double t_ = 0;
};

/// On/off: Poisson at `rate` during bursts [k(on+off), k(on+off)+on), nothing in the
/// idle gaps between. The first burst starts at 0.
class on_off_arrivals : public arrival_process {
public:
  on_off_arrivals(double rate, double on_s, double off_s);
  double next(std::mt19937_64& rng) override;

private:
  std::exponential_distribution<double> gap_;
  double on_s_, off_s_;
  double active_ = 0; ///< time spent inside bursts so far
};

/// Two-state Markov-modulated Poisson process: Poisson at rate[s] while in state s,
/// leaving s after an exponential dwell with mean dwell_s[s]. Starts in state 0.
class mmpp2_arrivals : public arrival_process {
public:
  mmpp2_arrivals(const double (&rate)[2], const double (&dwell_s)[2]);
  double next(std::mt19937_64& rng) override;

private:
  double rate_[2], dwell_s_[2];
  int state_ = 0;
  double t_ = 0;
  double left_ = -1; ///< time left in the current state; < 0 before the first draw
};

/// The process for `c` (nullptr for closed loop).
std::unique_ptr<arrival_process> make_arrivals(const arrival_config& c);

} // namespace prfaas::loadgen

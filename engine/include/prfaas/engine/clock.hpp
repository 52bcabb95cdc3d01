#pragma once

#include <chrono>

namespace prfaas::engine {

/// Nanoseconds since an arbitrary, clock-specific epoch.
using nanos = std::chrono::nanoseconds;

/// Injected time source. Engines never read the wall clock themselves: the profile
/// engine "computes" by calling sleep_for(), which a real clock turns into a real
/// sleep and a manual clock into an instant advance of virtual time.
class clock {
public:
  virtual ~clock() = default;
  virtual nanos now() const = 0;
  virtual void sleep_for(nanos d) = 0;
};

/// Monotonic wall time (std::chrono::steady_clock); sleep_for really sleeps.
class real_clock final : public clock {
public:
  nanos now() const override;
  void sleep_for(nanos d) override;
};

/// Virtual time: starts at `start`, moves only through sleep_for() and advance().
/// Not thread-safe; meant for single-threaded simulation and tests.
class manual_clock final : public clock {
public:
  explicit manual_clock(nanos start = nanos{0}) : now_(start) {}
  nanos now() const override { return now_; }
  void sleep_for(nanos d) override { advance(d); }
  void advance(nanos d) {
    if (d.count() > 0)
      now_ += d;
  }

private:
  nanos now_;
};

} // namespace prfaas::engine

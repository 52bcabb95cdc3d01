#pragma once

// A progress line for long simulations: on a terminal, one '\r'-redrawn line on stderr
// (requests done, virtual time, simulation events per wall second, ETA), at most twice
// a wall second; nothing at all when stderr is piped or redirected, so logs and JSON
// stay clean. Called from a simulation's stop predicate, which runs once per event:
// `tick` only reads the clock every 4,096 calls.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <unistd.h>

namespace prfaas {

class progress_line {
public:
  /// `what` names the work ("prfaas-sim at 2.0 req/s"); `force` draws even when stderr
  /// is not a terminal.
  explicit progress_line(std::string what, bool force = false)
      : what_(std::move(what)), on_(force || ::isatty(STDERR_FILENO) == 1), start_(clock::now()),
        last_(start_) {}
  ~progress_line() { finish(); }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  bool enabled() const { return on_; }

  /// Where the work stands; `events` counts the simulation's events so far.
  void tick(size_t done, size_t total, double virtual_s, uint64_t events) {
    if (!on_ || (++calls_ & 4095) != 0)
      return;
    const auto now = clock::now();
    if (now - last_ < std::chrono::milliseconds(500))
      return;
    draw(now, done, total, virtual_s, events);
  }

  /// The last line, then a newline (once; the destructor calls it too).
  void finish(size_t done, size_t total, double virtual_s, uint64_t events) {
    if (!on_ || finished_)
      return;
    draw(clock::now(), done, total, virtual_s, events);
    finish();
  }

private:
  using clock = std::chrono::steady_clock;

  void finish() {
    if (on_ && drawn_ && !finished_)
      std::fputc('\n', stderr);
    finished_ = true;
  }

  void draw(clock::time_point now, size_t done, size_t total, double virtual_s, uint64_t events) {
    const double wall = std::chrono::duration<double>(now - start_).count();
    const double span = std::chrono::duration<double>(now - last_).count();
    const double rate = span > 0 ? static_cast<double>(events - last_events_) / span : 0;
    std::string eta = "?";
    if (done >= total)
      eta = "0";
    else if (done > 0)
      eta = std::to_string(
          static_cast<long>(wall * static_cast<double>(total - done) / static_cast<double>(done)));
    std::fprintf(stderr, "\r%s: %zu/%zu requests  virtual %.1f s  %.2fM events/s  ETA %s s   ",
                 what_.c_str(), done, total, virtual_s, rate / 1e6, eta.c_str());
    std::fflush(stderr);
    last_ = now;
    last_events_ = events;
    drawn_ = true;
  }

  std::string what_;
  bool on_;
  clock::time_point start_, last_;
  uint64_t calls_ = 0, last_events_ = 0;
  bool drawn_ = false, finished_ = false;
};

} // namespace prfaas

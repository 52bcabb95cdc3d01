#pragma once

// A progress line for long work: on a terminal, one '\r'-redrawn line on stderr
// (requests or seeds done, virtual time, simulation events per wall second, ETA; or a
// live run's own status text), at most twice a wall second; nothing at all when stderr
// is piped or redirected, so logs and JSON stay clean. Called from a simulation's stop predicate,
// which runs once per event: `tick` only reads the clock every 4,096 calls.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <unistd.h>

namespace prfaas {

class progress_line {
public:
  /// `what` names the work ("prfaas-sim at 2.0 req/s"); `unit` what `done` counts;
  /// `force` draws even when stderr is not a terminal.
  explicit progress_line(std::string what, bool force = false, std::string unit = "requests")
      : what_(std::move(what)), unit_(std::move(unit)), on_(force || ::isatty(STDERR_FILENO) == 1),
        start_(clock::now()), last_(start_) {}
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

  /// Where the work stands, drawn now unless drawn in the last half second: for
  /// callers with few, long steps (a chaos sweep's seeds).
  void step(size_t done, size_t total, double virtual_s, uint64_t events) {
    if (on_ && clock::now() - last_ >= std::chrono::milliseconds(500))
      draw(clock::now(), done, total, virtual_s, events);
  }

  /// Any status text in the line's place (a live run has no event count), at most
  /// twice a second unless `now`.
  void show(const std::string& text, bool now = false) {
    if (!on_ || (!now && clock::now() - last_ < std::chrono::milliseconds(500)))
      return;
    std::fprintf(stderr, "\r\033[K%s: %s", what_.c_str(), text.c_str());
    std::fflush(stderr);
    last_ = clock::now();
    drawn_ = true;
  }

  /// A line of its own above the progress line (which the next draw brings back).
  void print_above(const std::string& line) {
    if (on_ && drawn_)
      std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }

  /// The last line, then a newline (once; the destructor calls it too).
  void finish(size_t done, size_t total, double virtual_s, uint64_t events) {
    if (!on_ || finished_)
      return;
    draw(clock::now(), done, total, virtual_s, events, true);
    finish();
  }

  /// Ends the line as it stands (a newline after it, once).
  void finish() {
    if (on_ && drawn_ && !finished_)
      std::fputc('\n', stderr);
    finished_ = true;
  }

private:
  using clock = std::chrono::steady_clock;

  /// `overall`: the rate since the start (the final line), else since the last draw.
  void draw(clock::time_point now, size_t done, size_t total, double virtual_s, uint64_t events,
            bool overall = false) {
    const double wall = std::chrono::duration<double>(now - start_).count();
    const double span = overall ? wall : std::chrono::duration<double>(now - last_).count();
    const uint64_t since = overall ? events : events - last_events_;
    const double rate = span > 0 ? static_cast<double>(since) / span : 0;
    std::string eta = "?";
    if (done >= total)
      eta = "0";
    else if (done > 0)
      eta = std::to_string(
          static_cast<long>(wall * static_cast<double>(total - done) / static_cast<double>(done)));
    std::fprintf(stderr, "\r%s: %zu/%zu %s  virtual %.1f s  %.2fM events/s  ETA %s s   ",
                 what_.c_str(), done, total, unit_.c_str(), virtual_s, rate / 1e6, eta.c_str());
    std::fflush(stderr);
    last_ = now;
    last_events_ = events;
    drawn_ = true;
  }

  std::string what_, unit_;
  bool on_;
  clock::time_point start_, last_;
  uint64_t calls_ = 0, last_events_ = 0;
  bool drawn_ = false, finished_ = false;
};

} // namespace prfaas

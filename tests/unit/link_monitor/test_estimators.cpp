// Estimators fed with synthetic series: smoothed RTT and its windowed minimum, probe
// loss and misses in a row, throughput and re-send rate from counter snapshots.

#include <catch2/catch.hpp>

#include "link_monitor/estimators.hpp"

using namespace std::chrono_literals;
using namespace prfaas::link;

namespace {

const time_point t0{std::chrono::seconds(1000)};

double ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

} // namespace

TEST_CASE("smoothed rtt follows a step gradually and the variation grows with it") {
  rtt_estimator e;
  CHECK(e.empty());
  for (int i = 0; i < 50; ++i)
    e.add(10ms, t0 + i * 100ms);
  CHECK(ms(e.smoothed()) == Approx(10.0));
  CHECK(ms(e.variation()) < 0.1);
  e.add(100ms, t0 + 5s);
  CHECK(ms(e.smoothed()) == Approx(10.0 + 0.125 * 90.0)); // one sample moves 1/8 of the way
  CHECK(ms(e.variation()) > 20.0);
  CHECK(ms(e.last()) == Approx(100.0));
  for (int i = 0; i < 100; ++i)
    e.add(100ms, t0 + 5s + i * 100ms);
  CHECK(ms(e.smoothed()) == Approx(100.0).epsilon(0.01));
}

TEST_CASE("the minimum rtt forgets samples older than its window") {
  rtt_estimator e{0.125, 0.25, 10s};
  e.add(20ms, t0);
  e.add(5ms, t0 + 1s);
  e.add(30ms, t0 + 2s);
  CHECK(ms(e.min()) == Approx(5.0));
  e.add(40ms, t0 + 10s);
  CHECK(ms(e.min()) == Approx(5.0)); // 5 ms is 9 s old
  e.add(40ms, t0 + 11500ms);
  CHECK(ms(e.min()) == Approx(30.0)); // 5 ms left the window, 30 ms (t0+2s) still in
  e.add(45ms, t0 + 13s);
  CHECK(ms(e.min()) == Approx(40.0));
  CHECK(e.samples() == 6);
}

TEST_CASE("probe window: loss over the last probes and misses in a row and last answer") {
  probe_window w{4};
  CHECK(w.loss() == 0.0);
  CHECK_FALSE(w.last_answer());
  w.answered(t0);
  w.lost();
  w.lost();
  CHECK(w.misses_in_a_row() == 2);
  CHECK(w.loss() == Approx(2.0 / 3.0));
  w.answered(t0 + 3s);
  CHECK(w.misses_in_a_row() == 0);
  CHECK(w.loss() == Approx(0.5));
  w.answered(t0 + 4s); // the first answer leaves the window
  CHECK(w.size() == 4);
  CHECK(w.loss() == Approx(0.5));
  w.answered(t0 + 5s);
  w.answered(t0 + 6s);
  CHECK(w.loss() == 0.0);
  w.lost();
  w.clear();
  CHECK(w.size() == 0);
  CHECK(w.misses_in_a_row() == 0);
  REQUIRE(w.last_answer());
  CHECK(*w.last_answer() == t0 + 6s);
}

TEST_CASE("throughput and re-send rate come from counter deltas over time") {
  throughput_estimator e{0.5};
  CHECK_FALSE(e.has_rate());
  link_counters c;
  e.add(c, t0); // baseline
  CHECK_FALSE(e.has_rate());
  // 125 MB acknowledged per second = 1 Gbit/s; 10 re-sends per second.
  for (int i = 1; i <= 5; ++i) {
    c.bytes_acked += 125'000'000;
    c.retransmits += 10;
    c.backlog_bytes = 1000u * static_cast<uint64_t>(i);
    e.add(c, t0 + i * 1s);
  }
  REQUIRE(e.has_rate());
  CHECK(e.throughput_bps() == Approx(1e9));
  CHECK(e.retransmit_rate() == Approx(10.0));
  CHECK(e.backlog_bytes() == 5000);
  CHECK(e.retransmits() == 50);
  // The link goes idle: the estimate halves per snapshot (gain 0.5).
  c.backlog_bytes = 0;
  e.add(c, t0 + 6s);
  CHECK(e.throughput_bps() == Approx(0.5e9));
  e.add(c, t0 + 7s);
  CHECK(e.throughput_bps() == Approx(0.25e9));
  CHECK(e.backlog_bytes() == 0);
}

TEST_CASE("a counter reset starts a new baseline instead of a bogus rate") {
  throughput_estimator e{1.0};
  link_counters c{.bytes_acked = 1'000'000, .retransmits = 5, .backlog_bytes = 0};
  e.add(c, t0);
  c.bytes_acked += 1'000'000;
  e.add(c, t0 + 1s);
  CHECK(e.throughput_bps() == Approx(8e6));
  // The data plane restarted: counters from zero.
  link_counters fresh{.bytes_acked = 10, .retransmits = 0, .backlog_bytes = 0};
  e.add(fresh, t0 + 2s);
  CHECK(e.throughput_bps() == Approx(8e6)); // unchanged: no sample from a reset
  fresh.bytes_acked += 2'000'000;
  e.add(fresh, t0 + 3s);
  CHECK(e.throughput_bps() == Approx(16e6));
  // A snapshot at the same instant gives no rate either.
  fresh.bytes_acked += 5'000'000;
  e.add(fresh, t0 + 3s);
  CHECK(e.throughput_bps() == Approx(16e6));
}

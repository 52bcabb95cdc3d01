// The link's state with hysteresis: thresholds to enter and (lower) to leave
// degraded, dwell times to get worse and better, down at once, and the whole chain —
// link_tracker: probe outcomes → window → classify → machine — fed with synthetic
// probe series: a partition, a heal, alternating single losses, a link that never
// answers.

#include <vector>

#include <catch2/catch.hpp>

#include "link_monitor/link_tracker.hpp"

using namespace std::chrono_literals;
using namespace prfaas::link;

namespace {

const time_point t0{std::chrono::seconds(1000)};

link_signals healthy(duration rtt = 10ms) {
  link_signals s;
  s.rtt = rtt;
  s.probes = 10;
  return s;
}

/// Drives a link_tracker as the actor does: a probe every `interval`, answered or
/// not, and a judgement after each; records the state changes.
struct bench {
  thresholds t;
  time_point now = t0;
  link_tracker link;
  std::vector<std::pair<time_point, condition>> changes;

  explicit bench(thresholds th) : t(th), link(th, 10, 0, t0) {}

  void probe(bool answered, duration interval = 200ms, duration sample = 10ms) {
    now += interval;
    if (answered)
      link.answered(sample, now);
    else
      link.lost();
    if (link.evaluate(now))
      changes.emplace_back(now, link.state());
  }
};

} // namespace

TEST_CASE("classify: each signal can degrade and leaving degraded needs a clear margin") {
  thresholds t;
  t.rtt_degraded = 100ms;
  t.retransmit_degraded = 50;
  t.backlog_degraded = 1s;
  t.recover_ratio = 0.5;
  CHECK(classify(healthy(), condition::up, t).target == condition::up);
  auto s = healthy();
  s.reachable = false;
  CHECK(classify(s, condition::up, t).target == condition::down);
  CHECK(classify(s, condition::up, t).reason == "unreachable");
  s = healthy();
  s.misses_in_a_row = 2;
  CHECK(classify(s, condition::up, t).reason == "probe_misses");
  s = healthy();
  s.probe_loss = 0.3;
  CHECK(classify(s, condition::up, t).reason == "probe_loss");
  s.probes = 2; // too few probes to judge loss on
  CHECK(classify(s, condition::up, t).target == condition::up);
  s = healthy();
  s.retransmit_rate = 60;
  CHECK(classify(s, condition::up, t).reason == "retransmits");
  s = healthy();
  s.queue_delay = 1500ms;
  CHECK(classify(s, condition::up, t).reason == "backlog");
  // RTT hysteresis: enter at 100 ms, leave below 50 ms.
  CHECK(classify(healthy(120ms), condition::up, t).target == condition::degraded);
  CHECK(classify(healthy(80ms), condition::up, t).target == condition::up);
  CHECK(classify(healthy(80ms), condition::degraded, t).target == condition::degraded);
  CHECK(classify(healthy(40ms), condition::degraded, t).target == condition::up);
  // Thresholds at 0 are off.
  thresholds off;
  off.loss_degraded = 0;
  off.degraded_misses = 0;
  s = healthy(10s);
  s.probe_loss = 0.9;
  s.misses_in_a_row = 9;
  s.retransmit_rate = 1e6;
  CHECK(classify(s, condition::up, off).target == condition::up);
}

TEST_CASE("the machine takes a worse state only after degrade_dwell and a better one after "
          "recover_dwell") {
  link_state_machine m{1s, 3s};
  CHECK(m.state() == condition::unknown);
  CHECK(m.update({condition::up, "ok"}, t0)); // first verdict at once
  CHECK(m.state() == condition::up);
  // Degraded for 900 ms, then fine again: no change.
  CHECK_FALSE(m.update({condition::degraded, "rtt"}, t0 + 1s));
  CHECK_FALSE(m.update({condition::degraded, "rtt"}, t0 + 1900ms));
  CHECK_FALSE(m.update({condition::up, "ok"}, t0 + 2s));
  CHECK(m.state() == condition::up);
  // Degraded without interruption for 1 s: change.
  CHECK_FALSE(m.update({condition::degraded, "rtt"}, t0 + 3s));
  CHECK_FALSE(m.update({condition::degraded, "rtt"}, t0 + 3500ms));
  CHECK(m.update({condition::degraded, "rtt"}, t0 + 4s));
  CHECK(m.state() == condition::degraded);
  CHECK(m.since() == t0 + 4s);
  CHECK(m.reason() == "rtt");
  // Down is taken at once.
  CHECK(m.update({condition::down, "unreachable"}, t0 + 4100ms));
  CHECK(m.state() == condition::down);
  // Recovery: healthy for 2.9 s, a relapse, then 3 s.
  CHECK_FALSE(m.update({condition::up, "ok"}, t0 + 5s));
  CHECK_FALSE(m.update({condition::up, "ok"}, t0 + 7900ms));
  CHECK_FALSE(m.update({condition::down, "unreachable"}, t0 + 8s)); // already down
  CHECK_FALSE(m.update({condition::up, "ok"}, t0 + 9s));
  CHECK_FALSE(m.update({condition::degraded, "probe_loss"}, t0 + 10s)); // still better than down
  CHECK(m.update({condition::up, "ok"}, t0 + 12s));
  CHECK(m.state() == condition::up);
  CHECK(m.transitions() == 4);
}

TEST_CASE("a partition goes degraded then down within down_after and a heal comes back up after "
          "recover_dwell") {
  thresholds t;
  t.down_after = 2s;
  t.recover_dwell = 3s;
  bench b{t};
  for (int i = 0; i < 20; ++i)
    b.probe(true);
  REQUIRE(b.link.state() == condition::up);
  const auto last_answer = b.now;
  while (b.now < last_answer + 10s)
    b.probe(false);
  REQUIRE(b.changes.size() == 3);
  CHECK(b.changes[1].second == condition::degraded);
  CHECK(b.changes[1].first == last_answer + 400ms); // second miss in a row
  CHECK(b.changes[2].second == condition::down);
  CHECK(b.changes[2].first >= last_answer + t.down_after);
  CHECK(b.changes[2].first <= last_answer + t.down_after + 200ms);
  const auto healed = b.now;
  while (b.now < healed + 10s)
    b.probe(true);
  REQUIRE(b.changes.size() == 4);
  CHECK(b.changes[3].second == condition::up);
  CHECK(b.changes[3].first >= healed + t.recover_dwell);
  CHECK(b.changes[3].first <= healed + t.recover_dwell + 400ms);
}

TEST_CASE("alternating single probe losses never flap the state") {
  thresholds t;
  bench b{t};
  for (int i = 0; i < 10; ++i)
    b.probe(true);
  REQUIRE(b.link.state() == condition::up);
  for (int i = 0; i < 500; ++i)
    b.probe(i % 2 == 0);
  // 50 % loss is degraded, and stays so: one change at most, never down.
  CHECK(b.changes.size() <= 2);
  for (auto& [at, c] : b.changes)
    CHECK(c != condition::down);
  CHECK(b.link.state() == condition::degraded);
  // Back to clean probes: up once the window clears, after the dwell; no bounce.
  for (int i = 0; i < 100; ++i)
    b.probe(true);
  CHECK(b.link.state() == condition::up);
  CHECK(b.changes.size() <= 3);
}

TEST_CASE("an occasional single loss keeps the link up") {
  thresholds t;
  bench b{t};
  for (int i = 0; i < 1000; ++i)
    b.probe(i % 10 != 5); // 10 % loss, never two in a row
  REQUIRE(b.changes.size() == 1);
  CHECK(b.changes[0].second == condition::up);
}

TEST_CASE("a link that never answers is unknown until down_after and then down") {
  thresholds t;
  t.down_after = 1s;
  link_tracker l{t, 10, 0, t0};
  l.lost();
  l.lost();
  l.lost();
  CHECK_FALSE(l.evaluate(t0 + 999ms));
  CHECK(l.state() == condition::unknown);
  CHECK(l.since() == t0);
  CHECK(l.evaluate(t0 + 1s));
  CHECK(l.state() == condition::down);
  CHECK(l.reason() == "unreachable");
}

TEST_CASE("utilisation and backlog delay come from data-plane snapshots and the capacity") {
  thresholds t;
  t.backlog_degraded = 1s;
  link_tracker l{t, 10, 1e9, t0}; // 1 Gbit/s
  l.answered(5ms, t0);
  CHECK(l.evaluate(t0));
  CHECK(l.state() == condition::up);
  l.traffic({.bytes_acked = 0, .retransmits = 0, .backlog_bytes = 0}, t0);
  l.traffic({.bytes_acked = 62'500'000, .retransmits = 0, .backlog_bytes = 250'000'000}, t0 + 1s);
  CHECK(l.utilisation() == Approx(0.5));
  auto s = l.signals(t0 + 1s);
  REQUIRE(s.queue_delay);
  CHECK(std::chrono::duration<double>(*s.queue_delay).count() == Approx(2.0)); // 2 Gbit queued
  l.answered(5ms, t0 + 1s);
  CHECK(l.evaluate(t0 + 1s));
  CHECK(l.state() == condition::degraded);
  CHECK(l.reason() == "backlog");
}

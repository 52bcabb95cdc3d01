#include <catch2/catch.hpp>

#include "prfaas/runtime/failure_detector.hpp"

using namespace std::chrono_literals;
using prfaas::failure_detector;
using prfaas::peer_state;

namespace {

prfaas::failure_detector_config cfg() {
  prfaas::failure_detector_config c;
  c.interval = 100ms;
  c.misses = 5;
  c.suspect_misses = 2;
  return c;
}

} // namespace

TEST_CASE("failure detector: up, suspect, down, back up") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  CHECK(fd.state("b") == peer_state::down);
  auto ev = fd.heard("b", 7, t0);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::up);
  CHECK(ev[0].incarnation == 7);
  CHECK(fd.tick(t0 + 199ms).empty());
  ev = fd.tick(t0 + 200ms);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::suspect);
  CHECK(fd.tick(t0 + 499ms).empty());
  ev = fd.tick(t0 + 500ms);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::down);
  CHECK(ev[0].silent_ns == std::chrono::nanoseconds(500ms).count());
  CHECK(fd.tick(t0 + 10s).empty()); // down is reported once
  ev = fd.heard("b", 7, t0 + 11s);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::up);
  CHECK(fd.up_count() == 1);
}

TEST_CASE("failure detector: a higher incarnation is a restart") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  fd.heard("b", 7, t0);
  auto ev = fd.heard("b", 9, t0 + 50ms);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].state == peer_state::down);
  CHECK(ev[0].incarnation == 7);
  CHECK(ev[1].state == peer_state::up);
  CHECK(ev[1].incarnation == 9);
  CHECK(fd.incarnation("b") == 9);
}

TEST_CASE("failure detector: stale incarnations and strangers are ignored") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  fd.heard("b", 9, t0);
  CHECK(fd.heard("b", 8, t0 + 10ms).empty());
  CHECK(fd.stale_heartbeats() == 1);
  CHECK(fd.incarnation("b") == 9);
  CHECK(fd.heard("mallory", 1, t0).empty());
  CHECK(fd.state("mallory") == peer_state::down);
  CHECK(fd.up_count() == 1);
}

TEST_CASE("failure detector: suspect recovers without a down") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  fd.heard("b", 1, t0);
  fd.tick(t0 + 300ms);
  CHECK(fd.state("b") == peer_state::suspect);
  auto ev = fd.heard("b", 1, t0 + 320ms);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::up);
}

TEST_CASE("failure detector: a peer declared down stays down until it acknowledges") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  fd.heard("b", 7, t0, 0);
  CHECK(fd.downs("b") == 0);
  REQUIRE(fd.tick(t0 + 500ms).back().state == peer_state::down);
  CHECK(fd.downs("b") == 1);
  // It was only paused: it speaks again, same incarnation, not knowing.
  CHECK(fd.heard("b", 7, t0 + 2s, 0).empty());
  CHECK(fd.state("b") == peer_state::down);
  CHECK(fd.unacknowledged_heartbeats() == 1);
  // While unacknowledged it is not declared down again (it is heard), nor up.
  CHECK(fd.tick(t0 + 2100ms).empty());
  CHECK(fd.downs("b") == 1);
  auto ev = fd.heard("b", 7, t0 + 2200ms, 1);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::up);
  // A second pause needs a second acknowledgement.
  fd.tick(t0 + 2700ms);
  CHECK(fd.downs("b") == 2);
  CHECK(fd.heard("b", 7, t0 + 3s, 1).empty());
  CHECK(fd.heard("b", 7, t0 + 3100ms, 2).size() == 1);
  CHECK(fd.state("b") == peer_state::up);
}

TEST_CASE("failure detector: a restarted peer has nothing to acknowledge") {
  failure_detector fd{cfg()};
  fd.add_peer("b");
  failure_detector::time_point t0{};
  fd.heard("b", 7, t0, 0);
  fd.tick(t0 + 500ms);
  REQUIRE(fd.downs("b") == 1);
  auto ev = fd.heard("b", 8, t0 + 1s, 0);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].state == peer_state::up);
  CHECK(ev[0].incarnation == 8);
  CHECK(fd.downs("b") == 0);
}

// The fault schedule: events in time order, and a fault applied late keeps its duration.

#include <catch2/catch.hpp>

#include "timeline.hpp"

using namespace prfaas::chaos;

namespace {

fault_spec link_cut(double at, double lasts) {
  fault_spec f;
  f.kind = fault_kind::link_down;
  f.link = {"a", "b"};
  f.at = seconds{at};
  f.lasts = seconds{lasts};
  return f;
}

/// "A+" for fault 0's apply, "B-" for fault 1's undo, ...
std::string order(const std::vector<fault_event>& ev) {
  std::string out;
  for (auto& e : ev)
    out += std::string(1, static_cast<char>('A' + e.fault)) + (e.apply ? "+" : "-");
  return out;
}

} // namespace

TEST_CASE("a scenario's faults are scheduled in time order, an undo before an apply at one "
          "instant",
          "[chaos][timeline]") {
  scenario s;
  s.faults = {link_cut(5, 2), link_cut(1, 4), link_cut(7, 1)};
  auto ev = timeline(s);
  CHECK(order(ev) == "B+B-A+A-C+C-");
  REQUIRE(ev.size() == 6);
  CHECK(ev[1].at_s == Approx(5)); // B ends at 5, when A starts: B's undo first
  CHECK(ev[3].at_s == Approx(7));
}

TEST_CASE("a fault applied late keeps its whole duration and the schedule stays in order",
          "[chaos][timeline]") {
  scenario s;
  // A: 21.1 s for 3.6 s; B: 21.7 s for 2.6 s (the shape of the random-2 run whose link
  // cut was applied 7.5 s late and undone 0.4 s later).
  s.faults = {link_cut(21.1, 3.6), link_cut(21.7, 2.6)};
  auto ev = timeline(s);
  REQUIRE(order(ev) == "A+B+B-A-");

  SECTION("late") {
    keep_duration(ev, 1, 0, 7.5); // A applied at 28.6
    CHECK(order(ev) == "A+B+B-A-");
    CHECK(ev[3].at_s == Approx(28.6 + 3.6));
    keep_duration(ev, 2, 1, 28.7 - 21.7); // B, held up behind it, applied at 28.7
    CHECK(order(ev) == "A+B+B-A-");
    CHECK(ev[2].at_s == Approx(28.7 + 2.6));
    CHECK(ev[3].at_s == Approx(32.2));
  }
  SECTION("late enough to end after a fault that started after it") {
    keep_duration(ev, 1, 0, 0.2);
    CHECK(ev[3].at_s == Approx(24.9));
    keep_duration(ev, 2, 1, 0.1); // B ends at 24.4: still before A
    CHECK(order(ev) == "A+B+B-A-");
    keep_duration(ev, 2, 1, 1.0); // now 25.4: after A's undo
    CHECK(order(ev) == "A+B+A-B-");
  }
  SECTION("on time or early: nothing moves") {
    auto before = ev;
    keep_duration(ev, 1, 0, 0);
    keep_duration(ev, 1, 0, -0.01);
    for (size_t i = 0; i < ev.size(); ++i)
      CHECK(ev[i].at_s == before[i].at_s);
  }
}

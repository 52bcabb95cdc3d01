// The simulation's own event queue (sim_time.hpp): callbacks in time order, equal
// instants in push order, none for an owner that is gone; and sim_timer on top of it
// under CAF's test coordinator, driven the way sim_world drives it.

#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "prfaas/runtime/sim_time.hpp"

using namespace std::chrono_literals;
using prfaas::sim_event_queue;

TEST_CASE("sim event queue: earliest first, equal instants in push order, dead owners skipped") {
  sim_event_queue q;
  const sim_event_queue::time_point t0{};
  std::vector<std::string> ran;
  auto owner = std::make_shared<int>(0);
  auto gone = std::make_shared<int>(0);
  q.push(t0 + 3s, owner, [&] { ran.push_back("c"); });
  q.push(t0 + 1s, owner, [&] { ran.push_back("a1"); });
  q.push(t0 + 2s, gone, [&] { ran.push_back("never"); });
  q.push(t0 + 1s, owner, [&] { ran.push_back("a2"); });
  q.push(t0 + 1s, owner, [&] { ran.push_back("a3"); });
  gone.reset();
  REQUIRE(q.size() == 5);
  CHECK(q.next() == t0 + 1s);
  while (!q.empty())
    q.run_next();
  CHECK(ran == std::vector<std::string>{"a1", "a2", "a3", "c"});
}

TEST_CASE(
    "sim timer: on an installed queue its callbacks wait for the driver, and stop with the timer") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_event_queue q;
  sim_event_queue::install(sys, &q);
  REQUIRE(sim_event_queue::of(sys) == &q);
  std::vector<int> ran;
  {
    auto kept = std::make_unique<prfaas::sim_timer>(sys);
    auto dropped = std::make_unique<prfaas::sim_timer>(sys);
    kept->after(2s, [&] { ran.push_back(2); });
    kept->after(1s, [&] { ran.push_back(1); });
    dropped->after(1s, [&] { ran.push_back(-1); });
    // Nothing went to CAF's clock: the queue holds all three.
    CHECK_FALSE(sched.has_pending_timeout());
    CHECK(q.size() == 3);
    dropped.reset();
    // Drive it: the clock moves to each callback's instant.
    while (!q.empty()) {
      sched.clock().current_time = q.next();
      q.run_next();
      sched.run();
    }
    CHECK(ran == std::vector<int>{1, 2});
    CHECK(sched.clock().current_time - caf::actor_clock::time_point{} >= 2s);
  }
  sim_event_queue::install(sys, nullptr);
  CHECK(sim_event_queue::of(sys) == nullptr);
  // Without a queue the timer falls back to CAF delayed messages.
  prfaas::sim_timer plain{sys};
  plain.after(1s, [&] { ran.push_back(3); });
  CHECK(sched.has_pending_timeout());
  sched.trigger_timeout();
  sched.run();
  CHECK(ran == std::vector<int>{1, 2, 3});
  sched.run();
}

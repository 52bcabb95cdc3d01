// cpu_gate: llama engines of one process take turns on the cores only when their
// compute threads outnumber them, and then first come, first served.
#include "llama/cpu_gate.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using prfaas::engine::llama_detail::cpu_gate;

namespace {

/// Spins until `pred` holds (the other thread got that far), failing after 10 s.
template <class Pred>
void await(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace

TEST_CASE("cpu_gate: threads that fit the cores never wait") {
  cpu_gate g(2);
  g.add(1);
  g.add(1);
  CHECK_FALSE(g.shared());
  cpu_gate::turn a(g);
  // A second turn while the first is held: with the threads fitting, it must not block
  // (were it to, this test would hang and time out under ctest).
  cpu_gate::turn b(g);
  CHECK(g.waited_seconds() == 0);
}

TEST_CASE("cpu_gate: oversubscribed, one turn at a time, in arrival order") {
  cpu_gate g(2);
  g.add(2);
  g.add(2);
  REQUIRE(g.shared());

  std::vector<int> order;
  std::atomic<int> inside{0}, most_inside{0};
  std::atomic<bool> release_first{false};

  auto body = [&](int who, bool hold) {
    cpu_gate::turn t(g);
    const int now = ++inside;
    int seen = most_inside.load();
    while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
    }
    order.push_back(who); // safe: one turn at a time is what is being tested
    if (hold)
      while (!release_first)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --inside;
  };

  std::thread first(body, 1, true);
  await([&] { return inside.load() == 1; }); // 1 holds the turn
  CHECK(g.queued() == 1);
  std::thread second(body, 2, false);
  await([&] { return g.queued() == 2; }); // 2 waits behind 1
  std::thread third(body, 3, false);
  await([&] { return g.queued() == 3; }); // 3 behind 2
  CHECK(order == std::vector<int>{1}); // neither 2 nor 3 entered while 1 held it
  release_first = true;
  first.join();
  second.join();
  third.join();
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK(most_inside.load() == 1);
  CHECK(g.queued() == 0);
  CHECK(g.waited_seconds() > 0);
}

TEST_CASE("cpu_gate: once engines stop and the threads fit, turns stop waiting") {
  cpu_gate g(2);
  g.add(2);
  g.add(2);
  REQUIRE(g.shared());
  g.remove(2);
  CHECK_FALSE(g.shared());
  cpu_gate::turn a(g);
  cpu_gate::turn b(g); // would block forever if the gate still made turns
  CHECK(g.waited_seconds() == 0);
}

TEST_CASE("cpu_gate: the process's cores come from its CPU affinity") {
  CHECK(cpu_gate::cores() >= 1);
  CHECK(cpu_gate::cores() <= std::thread::hardware_concurrency());
}

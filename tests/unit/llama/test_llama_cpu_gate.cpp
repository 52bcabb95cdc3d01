// cpu_gate: every llama graph of a process runs on the gate's one thread, one at a time,
// in the order submitted.
#include "llama/cpu_gate.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using prfaas::engine::llama_detail::cpu_gate;

namespace {

/// Waits until `pred` holds (another thread got that far), failing after 10 s.
template <class Pred> void await(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace

TEST_CASE("cpu_gate: graphs run on one thread of the gate's, and their results come back") {
  cpu_gate g;
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  std::vector<std::thread> callers;
  std::atomic<int> sum{0};
  for (int i = 1; i <= 4; ++i)
    callers.emplace_back([&, i] {
      double waited = -1;
      const int32_t r = g.run(
          [&] {
            std::lock_guard lock(mu);
            ran_on.insert(std::this_thread::get_id());
            return int32_t{i * 10};
          },
          waited);
      CHECK(waited >= 0);
      sum += r;
    });
  std::set<std::thread::id> caller_ids;
  for (auto& t : callers) {
    caller_ids.insert(t.get_id());
    t.join();
  }
  CHECK(sum.load() == 100);
  REQUIRE(ran_on.size() == 1);
  CHECK(caller_ids.count(*ran_on.begin()) == 0);
  CHECK(*ran_on.begin() != std::this_thread::get_id());
}

TEST_CASE("cpu_gate: one graph at a time, in the order submitted") {
  cpu_gate g;
  std::vector<int> order;
  std::atomic<int> inside{0}, most_inside{0}, submitted{0};
  std::atomic<bool> release_first{false};
  auto graph = [&](int who, bool hold) {
    return [&, who, hold] {
      const int now = ++inside;
      int seen = most_inside.load();
      while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
      }
      order.push_back(who); // one at a time is what is being tested
      if (hold)
        while (!release_first)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      --inside;
      return int32_t{0};
    };
  };
  auto caller = [&](int who, bool hold) {
    double waited = 0;
    ++submitted;
    g.run(graph(who, hold), waited);
  };
  std::thread first(caller, 1, true);
  await([&] { return inside.load() == 1; }); // 1 is running
  std::thread second(caller, 2, false);
  await([&] { return submitted.load() == 2; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20)); // 2 queues before 3
  std::thread third(caller, 3, false);
  await([&] { return submitted.load() == 3; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(order == std::vector<int>{1}); // neither 2 nor 3 ran while 1 held the thread
  release_first = true;
  first.join();
  second.join();
  third.join();
  CHECK(most_inside.load() == 1);
  CHECK((order == std::vector<int>{1, 2, 3} || order == std::vector<int>{1, 3, 2}));
  CHECK(g.waited_seconds() > 0); // 2 and 3 queued behind 1
}

// prefill_queue (actors/prefill/prefill_queue.hpp): the prefill worker's admission,
// FIFO order, deadlines, pace and cancellation, driven event by event without an actor.

#include <map>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "prefill/prefill_queue.hpp"

using prfaas::serving::prefill_queue;
using namespace std::chrono_literals;
using clock_type = prefill_queue::clock_type;

namespace {

const clock_type::time_point t0{};

prefill_queue::order order_of(const std::string& id, uint64_t work,
                              clock_type::duration budget = 60s, bool pull_first = false,
                              uint64_t transfer_id = 0) {
  return {.request_id = id,
          .transfer_id = transfer_id ? transfer_id : std::hash<std::string>{}(id),
          .work = work,
          .deadline = t0 + budget,
          .budget = budget,
          .pull_first = pull_first};
}

prefill_queue::key admit(prefill_queue& q, const prefill_queue::order& o) {
  auto r = q.admit(o);
  REQUIRE(std::holds_alternative<prefill_queue::key>(r));
  return std::get<prefill_queue::key>(r);
}

using keys = std::vector<prefill_queue::key>;

} // namespace

TEST_CASE("orders run one at a time, first come first served") {
  prefill_queue q{8};
  auto a = admit(q, order_of("a", 100));
  auto b = admit(q, order_of("b", 200));
  CHECK(q.queued_tokens() == 300);
  auto s = q.next(t0);
  REQUIRE(s.start == keys{a});
  CHECK(q.next(t0).start.empty()); // the engine is busy
  q.engine_done(a, 100, 1s, true);
  CHECK(q.queued_tokens() == 200); // a's work is done; its transfer may still be open
  CHECK(q.contains(a));
  q.transfer_ended(a);
  CHECK_FALSE(q.contains(a));
  CHECK(q.next(t0).start == keys{b});
}

TEST_CASE("orders the engine computes together start together, in queue order") {
  prefill_queue q{16};
  const prefill_queue::batch_limit limit{.orders = 3, .tokens = 512};
  auto a = admit(q, order_of("a", 100));
  auto b = admit(q, order_of("b", 200));
  auto c = admit(q, order_of("c", 100));
  auto d = admit(q, order_of("d", 50)); // a fourth: past the orders' limit
  auto s = q.next(t0, limit);
  REQUIRE(s.start == keys{a, b, c});
  CHECK(q.running() == 3);
  CHECK(q.next(t0, limit).start.empty()); // the engine is busy with the batch
  q.engine_done(a, 100, 1s, true);
  q.engine_done(b, 200, 2s, true);
  CHECK(q.next(t0, limit).start.empty()); // c is still computing
  q.engine_done(c, 100, 1s, true);
  CHECK(q.running() == 0);
  CHECK(q.tokens_per_s() == Approx(100)); // each order's share: 100 tokens/s throughout

  SECTION("a long order heads its own batch, and nothing overtakes it") {
    auto big = admit(q, order_of("big", 600)); // more than the tokens' limit: alone
    auto e = admit(q, order_of("e", 10));
    CHECK(q.next(t0, limit).start == keys{d}); // d, then big does not fit behind it
    q.engine_done(d, 50, 1s, true);
    CHECK(q.next(t0, limit).start == keys{big});
    q.engine_done(big, 600, 1s, true);
    CHECK(q.next(t0, limit).start == keys{e});
  }
  SECTION("expired orders are dropped on the way, the batch fills past them") {
    auto late = admit(q, order_of("late", 10, 1s));
    auto e = admit(q, order_of("e", 10, 10s));
    auto s2 = q.next(t0 + 2s, limit);
    CHECK(s2.expired == keys{late});
    CHECK(s2.start == keys{d, e});
  }
  SECTION("without a limit, one at a time") {
    auto e = admit(q, order_of("e", 10));
    CHECK(q.next(t0).start == keys{d});
    q.engine_done(d, 50, 1s, true);
    CHECK(q.next(t0).start == keys{e});
  }
}

TEST_CASE("admission refuses a full queue and work that cannot be done in the budget") {
  prefill_queue q{2};
  admit(q, order_of("a", 100));
  admit(q, order_of("b", 100));
  auto full = q.admit(order_of("c", 100));
  REQUIRE(std::holds_alternative<prefill_queue::refusal>(full));
  CHECK_THAT(std::get<prefill_queue::refusal>(full).why, Catch::Contains("queue full (2)"));

  SECTION("the pace is learnt from prefills of 64 tokens or more, smoothed") {
    prefill_queue p{8};
    auto k = admit(p, order_of("a", 1000));
    p.next(t0);
    p.engine_done(k, 1000, 1s, true); // 1000 tokens/s
    CHECK(p.tokens_per_s() == Approx(1000));
    auto small = admit(p, order_of("s", 10));
    p.next(t0);
    p.engine_done(small, 10, 1s, true); // too small to say anything of the pace
    CHECK(p.tokens_per_s() == Approx(1000));
    auto k2 = admit(p, order_of("b", 500));
    p.next(t0);
    p.engine_done(k2, 500, 1s, true); // 500 tokens/s: 0.8 * 1000 + 0.2 * 500
    CHECK(p.tokens_per_s() == Approx(900));
    // The prefills themselves, for the re-planner (the 10-token one says nothing).
    REQUIRE(p.recent().size() == 2);
    CHECK(p.recent()[0].tokens == 1000);
    CHECK(p.recent()[1].tokens == 500);
    CHECK(p.recent()[1].seconds == Approx(1.0));

    admit(p, order_of("queued", 4500)); // 5 s of work ahead at 900 tokens/s
    auto late = p.admit(order_of("late", 900, 5s));
    REQUIRE(std::holds_alternative<prefill_queue::refusal>(late));
    CHECK_THAT(std::get<prefill_queue::refusal>(late).why, Catch::Contains("4500 tokens queued"));
    CHECK(std::holds_alternative<prefill_queue::key>(p.admit(order_of("in time", 900, 7s))));
    CHECK(std::holds_alternative<prefill_queue::key>(p.admit(order_of("no budget", 900, 0s))));
  }
}

TEST_CASE("the last prefills are kept for the re-planner, oldest first") {
  const uint32_t n = prefill_queue::recent_kept + 2;
  prefill_queue q{64};
  for (uint32_t i = 1; i <= n; ++i) {
    auto k = admit(q, order_of("r" + std::to_string(i), 100 * i));
    q.next(t0);
    q.engine_done(k, 100 * i, std::chrono::milliseconds(250 * i), true);
    q.transfer_ended(k);
  }
  REQUIRE(q.recent().size() == prefill_queue::recent_kept);
  CHECK(q.recent().front().tokens == 300); // the first two are gone
  CHECK(q.recent().front().seconds == Approx(0.75));
  CHECK(q.recent().back().tokens == 100 * n);
  CHECK(q.recent().back().seconds == Approx(0.25 * n));
  // A failed prefill says nothing of the speed.
  auto bad = admit(q, order_of("bad", 5000));
  q.next(t0);
  q.engine_done(bad, 5000, 1s, false);
  CHECK(q.recent().back().tokens == 100 * n);
}

TEST_CASE("a queued order past its deadline is dropped when its turn comes") {
  prefill_queue q{8};
  auto a = admit(q, order_of("a", 10, 1s));
  auto b = admit(q, order_of("b", 10, 10s));
  auto s = q.next(t0 + 2s);
  CHECK(s.expired == std::vector<prefill_queue::key>{a});
  CHECK(s.start == keys{b});
  CHECK_FALSE(q.contains(a));
  CHECK(q.queued_tokens() == 10);
}

TEST_CASE("an order waiting for its cache move joins the queue when the move ends") {
  prefill_queue q{8};
  auto a = admit(q, order_of("a", 10, 60s, true));
  CHECK(q.queued() == 0);
  CHECK(q.next(t0).start.empty());
  q.pull_ended(a);
  CHECK(q.next(t0).start == keys{a});
}

TEST_CASE("cancel removes waiting orders and cancels open transfers, of one attempt or all") {
  prefill_queue q{8};
  auto run = admit(q, order_of("r", 10, 60s, false, 1));
  auto pulling = admit(q, order_of("r", 20, 60s, true, 2));
  auto queued = admit(q, order_of("r", 40, 60s, false, 3));
  auto other = admit(q, order_of("x", 80, 60s, false, 4));
  REQUIRE(q.next(t0).start == keys{run});

  SECTION("one attempt") {
    auto c = q.cancel("r", 3);
    CHECK(c.removed == std::vector<prefill_queue::key>{queued});
    CHECK(c.cancel_transfer.empty());
    CHECK(q.contains(pulling));
  }
  SECTION("every attempt: a cancelled cache move gives its work back") {
    auto c = q.cancel("r", 0);
    CHECK(std::set<prefill_queue::key>(c.removed.begin(), c.removed.end()) ==
          std::set<prefill_queue::key>{pulling, queued});
    CHECK(c.cancel_transfer == std::vector<prefill_queue::key>{run});
    CHECK(q.queued_tokens() == 10 + 80);
    q.pull_ended(pulling); // its move ends later: nothing rejoins
    CHECK(q.queued() == 1);
    // The transfer's cancellation ends it before the engine is done.
    q.transfer_ended(run);
    CHECK(q.contains(run));
    q.engine_done(run, 10, 1ms, true);
    CHECK_FALSE(q.contains(run));
    CHECK(q.queued_tokens() == 80);
    CHECK(q.next(t0).start == keys{other});
  }
}

TEST_CASE("random event orders: every order leaves exactly once and the work adds up") {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng{seed};
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    prefill_queue q{4};
    // Half the seeds start one order at a time, half batches of up to 3 orders, 400 tokens.
    const auto limit = seed % 2 == 0 ? prefill_queue::batch_limit{}
                                     : prefill_queue::batch_limit{.orders = 3, .tokens = 400};
    enum class ph { pulling, queued, running, sent };
    struct model_order {
      ph phase;
      uint64_t work;
      bool transfer_open;
    };
    std::map<prefill_queue::key, model_order> live;
    std::set<prefill_queue::key> left;
    auto now = t0;
    auto leave = [&](prefill_queue::key k) {
      REQUIRE(live.erase(k) == 1); // left once, and only a live order
      REQUIRE(left.insert(k).second);
      REQUIRE_FALSE(q.contains(k));
    };
    auto check_invariants = [&] {
      uint64_t work = 0;
      size_t running = 0, queued = 0;
      for (auto& [k, m] : live) {
        REQUIRE(q.contains(k));
        if (m.phase != ph::sent)
          work += m.work;
        running += m.phase == ph::running;
        queued += m.phase == ph::queued;
      }
      REQUIRE(q.queued_tokens() == work);
      REQUIRE(running <= limit.orders);
      REQUIRE(q.running() == running);
      REQUIRE(q.queued() == queued);
      REQUIRE(q.size() == live.size());
    };
    auto of_phase = [&](ph p) {
      std::vector<prefill_queue::key> out;
      for (auto& [k, m] : live)
        if (m.phase == p)
          out.push_back(k);
      return out;
    };
    int requests = 0;
    for (int step = 0; step < 300; ++step) {
      now += std::chrono::milliseconds(pick(200));
      switch (pick(7)) {
      case 0: { // admit
        const uint64_t work = 1 + pick(500);
        const bool pull = pick(3) == 0;
        auto o = order_of("r" + std::to_string(pick(6)), work,
                          std::chrono::milliseconds(100 + pick(3000)), pull, ++requests);
        o.deadline = now + o.budget;
        auto r = q.admit(o);
        if (auto* k = std::get_if<prefill_queue::key>(&r))
          live[*k] = {pull ? ph::pulling : ph::queued, work, false};
        break;
      }
      case 1: { // a cache move ends
        auto ks = of_phase(ph::pulling);
        if (!ks.empty()) {
          auto k = ks[pick(ks.size())];
          q.pull_ended(k);
          live[k].phase = ph::queued;
        }
        break;
      }
      case 2: { // the engine is free (or not: then nothing starts)
        const bool busy = !of_phase(ph::running).empty();
        auto s = q.next(now, limit);
        for (auto k : s.expired) {
          REQUIRE(live.at(k).phase == ph::queued);
          leave(k);
        }
        REQUIRE((s.start.empty() || !busy));
        uint64_t work = 0;
        for (auto k : s.start) {
          REQUIRE(live.at(k).phase == ph::queued);
          live[k].phase = ph::running;
          live[k].transfer_open = true;
          work += live[k].work;
        }
        REQUIRE(s.start.size() <= limit.orders);
        REQUIRE((s.start.size() <= 1 || work <= limit.tokens)); // only a lone order is larger
        break;
      }
      case 3: { // the engine is done
        auto ks = of_phase(ph::running);
        if (!ks.empty()) {
          auto k = ks[0];
          q.engine_done(k, static_cast<uint32_t>(live[k].work),
                        std::chrono::milliseconds(1 + pick(100)), pick(5) != 0);
          if (live[k].transfer_open)
            live[k].phase = ph::sent;
          else
            leave(k);
        }
        break;
      }
      case 4: { // a transfer ends
        std::vector<prefill_queue::key> open;
        for (auto& [k, m] : live)
          if (m.transfer_open)
            open.push_back(k);
        if (!open.empty()) {
          auto k = open[pick(open.size())];
          q.transfer_ended(k);
          live[k].transfer_open = false;
          if (live[k].phase == ph::sent)
            leave(k);
        }
        break;
      }
      default: { // a cancel, of one attempt or of every attempt of a request
        const std::string id = "r" + std::to_string(pick(6));
        auto c = q.cancel(id, 0);
        for (auto k : c.removed) {
          REQUIRE((live.at(k).phase == ph::pulling || live.at(k).phase == ph::queued));
          leave(k);
        }
        for (auto k : c.cancel_transfer)
          REQUIRE(live.at(k).transfer_open);
        break;
      }
      }
      check_invariants();
    }
    // Drain: every move ends, the engine runs everything, every transfer ends.
    for (auto k : of_phase(ph::pulling)) {
      q.pull_ended(k);
      live[k].phase = ph::queued;
    }
    for (int guard = 0; !live.empty() && guard < 1000; ++guard) {
      for (auto& [k, m] : live)
        if (m.transfer_open && m.phase == ph::sent) {
          q.transfer_ended(k);
          m.transfer_open = false;
        }
      for (auto k : of_phase(ph::sent))
        leave(k);
      auto s = q.next(now, limit);
      for (auto k : s.expired)
        leave(k);
      for (auto k : s.start) {
        live[k].phase = ph::running;
        live[k].transfer_open = true;
        q.engine_done(k, 1, 1ms, true);
        live[k].phase = ph::sent;
      }
      for (auto k : of_phase(ph::running)) { // started before the drain
        q.engine_done(k, 1, 1ms, true);
        if (live[k].transfer_open)
          live[k].phase = ph::sent;
        else
          leave(k);
      }
      check_invariants();
    }
    REQUIRE(live.empty());
    REQUIRE(q.size() == 0);
    REQUIRE(q.queued_tokens() == 0);
  }
}

namespace {

prefill_queue::order from(const std::string& origin, const std::string& id, uint64_t work,
                          double weight = 1, clock_type::duration budget = 3600s) {
  auto o = order_of(id, work, budget);
  o.origin = origin;
  o.weight = weight;
  return o;
}

/// Runs the queue to empty: the request ids in the order they started.
std::vector<std::string> drain(prefill_queue& q, std::map<prefill_queue::key, std::string>& ids) {
  std::vector<std::string> out;
  for (auto s = q.next(t0); !s.start.empty(); s = q.next(t0)) {
    const auto k = s.start.front();
    out.push_back(ids.at(k));
    q.engine_done(k, 100, 10ms, true);
    q.transfer_ended(k);
  }
  return out;
}

} // namespace

TEST_CASE("PD clusters sharing a prefill worker are served by their shares, none starves",
          "[fair]") {
  std::map<prefill_queue::key, std::string> ids;
  auto add = [&](prefill_queue& q, const prefill_queue::order& o) {
    ids[admit(q, o)] = o.request_id;
  };
  SECTION("equal shares: a backlog of one cluster does not hold the other's orders back") {
    prefill_queue q{64};
    for (int i = 0; i < 6; ++i)
      add(q, from("pd0", "a" + std::to_string(i), 1000));
    add(q, from("pd1", "b0", 1000));
    add(q, from("pd1", "b1", 1000));
    // FIFO would run b0 seventh; fair queueing runs the two clusters in turn.
    CHECK(drain(q, ids) ==
          std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "a3", "a4", "a5"});
  }
  SECTION("shares 2 : 1 give twice the tokens while both have work queued") {
    prefill_queue q{64};
    for (int i = 0; i < 6; ++i) {
      add(q, from("pd0", "a" + std::to_string(i), 1000, 2));
      add(q, from("pd1", "b" + std::to_string(i), 1000, 1));
    }
    auto order = drain(q, ids);
    order.resize(9);
    CHECK(std::count_if(order.begin(), order.end(), [](auto& id) { return id[0] == 'a'; }) == 6);
  }
  SECTION("one origin: first come first served, whatever the sizes") {
    prefill_queue q{64};
    add(q, from("pd0", "big", 50000));
    add(q, from("pd0", "small", 10));
    add(q, from("pd0", "mid", 3000));
    CHECK(drain(q, ids) == std::vector<std::string>{"big", "small", "mid"});
  }
}

TEST_CASE("admission counts only the work fair queueing runs first", "[fair]") {
  prefill_queue q{64};
  // 10 s of pd0's work queued at 1000 tokens/s.
  auto warm = admit(q, order_of("warm", 1000));
  q.next(t0);
  q.engine_done(warm, 1000, 1s, true);
  q.transfer_ended(warm);
  REQUIRE(q.tokens_per_s() == Approx(1000));
  for (int i = 0; i < 10; ++i)
    admit(q, from("pd0", "a" + std::to_string(i), 1000));
  // What a load report tells each PD cluster's scheduler: the work ahead of its next
  // order (pd0 behind all of its own, pd1 behind the order now at the head).
  CHECK(q.work_ahead(from("pd0", "next", 0)) == 10000);
  CHECK(q.work_ahead(from("pd1", "next", 0)) == 1000);
  // pd0's next order would wait 11 s: refused within a 5 s budget.
  CHECK(std::holds_alternative<prefill_queue::refusal>(q.admit(from("pd0", "late", 1000, 1, 5s))));
  // pd1's first order runs next (its start tag is the earliest): admitted.
  CHECK(std::holds_alternative<prefill_queue::key>(q.admit(from("pd1", "b0", 1000, 1, 5s))));
}

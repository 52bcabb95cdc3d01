// request_rules (actors/gateway/request_rules.hpp): the gateway's decisions about one
// request — token events, failover, resume, node loss, the sweep — without an actor.

#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gateway/request_rules.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;
namespace rules = prfaas::serving::rules;

TEST_CASE("token events: in order taken, re-sent ones dropped, a hole means events were lost") {
  using v = rules::token_verdict;
  CHECK(rules::classify_tokens("d0", 5, "d0", 5, false) == v::take);
  CHECK(rules::classify_tokens("d0", 5, "", 5, false) == v::take); // (events may omit the node)
  CHECK(rules::classify_tokens("d0", 5, "d0", 3, false) == v::duplicate);
  CHECK(rules::classify_tokens("d0", 5, "d0", 7, false) == v::gap);
  CHECK(rules::classify_tokens("d0", 5, "d0", 5, true) == v::failed);
  // The request moved on: its old worker is not heard any more, whatever it says.
  CHECK(rules::classify_tokens("d1", 5, "d0", 5, false) == v::stale_worker);
  CHECK(rules::classify_tokens("", 5, "d0", 5, true) == v::stale_worker);
  // A late duplicate is a duplicate even when it carries an error.
  CHECK(rules::classify_tokens("d0", 5, "d0", 4, true) == v::duplicate);
}

TEST_CASE("a failed prefill is retried locally until max_attempts, and resumes are not failures") {
  using v = rules::failover_verdict;
  CHECK(rules::after_prefill_failure(1, 0, 2, false) == v::retry_locally);
  CHECK(rules::after_prefill_failure(2, 0, 2, false) == v::give_up);
  CHECK(rules::after_prefill_failure(2, 0, 2, true) == v::give_up_overloaded);
  CHECK(rules::after_prefill_failure(3, 2, 2, false) == v::retry_locally); // two were resumes
  CHECK(rules::after_prefill_failure(4, 2, 2, true) == v::give_up_overloaded);
  CHECK(rules::may_resume(0, 2));
  CHECK(rules::may_resume(1, 2));
  CHECK_FALSE(rules::may_resume(2, 2));
  CHECK_FALSE(rules::may_resume(0, 0));
}

TEST_CASE(
    "a node's death: its decode work resumes, its prefill work not yet delivered fails over") {
  using s = request_state;
  using l = rules::node_loss;
  CHECK(rules::on_node_down(s::decoding, "n1", "n2", "n1") == l::resume);
  CHECK(rules::on_node_down(s::prefilling, "n1", "n2", "n1") == l::resume); // KV was going there
  CHECK(rules::on_node_down(s::prefilling, "n1", "n2", "n2") == l::failover);
  CHECK(rules::on_node_down(s::transferring, "n1", "n2", "n2") == l::failover);
  CHECK(rules::on_node_down(s::decoding, "n1", "n2", "n2") == l::none); // the KV is in already
  CHECK(rules::on_node_down(s::routed, "n1", "n2", "n2") == l::none);
  CHECK(rules::on_node_down(s::decoding, "n1", "n1", "n1") == l::resume); // both on it: decode wins
  CHECK(rules::on_node_down(s::done, "n1", "n2", "n1") == l::none);
  CHECK(rules::on_node_down(s::failed, "n1", "n2", "n2") == l::none);
  CHECK(rules::on_node_down(s::decoding, "n1", "n2", "n3") == l::none);
}

TEST_CASE("the sweep: a gone client first, then the deadline, then a silent decode worker") {
  const std::chrono::steady_clock::time_point t0{};
  rules::sweep_input in{.client_gone = false,
                        .now = t0 + 20s,
                        .deadline = t0 + 60s,
                        .last_event = t0 + 5s,
                        .stall_timeout = 10s,
                        .state = request_state::decoding,
                        .status_asked = false};
  CHECK(rules::sweep(in) == rules::sweep_verdict::check_stall);
  SECTION("not yet silent long enough") {
    in.last_event = t0 + 11s;
    CHECK(rules::sweep(in) == rules::sweep_verdict::none);
  }
  SECTION("a status query is out already") {
    in.status_asked = true;
    CHECK(rules::sweep(in) == rules::sweep_verdict::none);
  }
  SECTION("stall checks off") {
    in.stall_timeout = 0s;
    CHECK(rules::sweep(in) == rules::sweep_verdict::none);
  }
  SECTION("no decode worker holds it yet (being routed)") {
    in.state = request_state::routed;
    CHECK(rules::sweep(in) == rules::sweep_verdict::none);
  }
  SECTION("past the deadline") {
    in.now = t0 + 60s;
    CHECK(rules::sweep(in) == rules::sweep_verdict::deadline);
    in.client_gone = true;
    CHECK(rules::sweep(in) == rules::sweep_verdict::abandoned);
  }
}

// A stream assembled by the rules from events that arrive duplicated, reordered and
// lost, with resumes on other workers (which continue from what was taken), never
// repeats or skips an index, and always completes.
TEST_CASE("random event orders: the assembled stream has every index once, in order") {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng{seed};
    auto chance = [&](int pct) { return std::uniform_int_distribution<int>(0, 99)(rng) < pct; };
    const uint32_t total = 20 + rng() % 60;
    std::vector<uint32_t> taken; // token values = their index in the output
    std::string worker = "d0";
    int workers = 1, resumes = 0;
    struct event {
      std::string node;
      uint32_t index, n;
    };
    std::vector<event> in_flight;
    uint32_t next_sent = 0; // the current worker's next index
    for (int step = 0; step < 10000 && taken.size() < total; ++step) {
      // The current worker sends its next event (1-3 tokens), sometimes lost on the way.
      if (next_sent < total && chance(60)) {
        const uint32_t n = std::min<uint32_t>(1 + rng() % 3, total - next_sent);
        if (!chance(10))
          in_flight.push_back({worker, next_sent, n});
        if (chance(15)) // re-sent (a retried delivery)
          in_flight.push_back({worker, next_sent, n});
        next_sent += n;
      }
      // A worker that is silent while nothing is in flight has lost its last events:
      // the stall check resumes the request, as the gateway's sweep does.
      if (in_flight.empty() && next_sent >= total && taken.size() < total) {
        worker = "d" + std::to_string(workers++);
        next_sent = static_cast<uint32_t>(taken.size());
      }
      if (in_flight.empty())
        continue;
      // Delivery in any order.
      const size_t pick = rng() % in_flight.size();
      const auto ev = in_flight[pick];
      in_flight.erase(in_flight.begin() + static_cast<long>(pick));
      const auto received = static_cast<uint32_t>(taken.size());
      switch (rules::classify_tokens(worker, received, ev.node, ev.index, false)) {
      case rules::token_verdict::take:
        for (uint32_t i = 0; i < ev.n; ++i)
          taken.push_back(ev.index + i);
        break;
      case rules::token_verdict::gap: // resume on a new worker from what was taken
        REQUIRE(rules::may_resume(static_cast<uint32_t>(resumes), 1000));
        ++resumes;
        worker = "d" + std::to_string(workers++);
        next_sent = received;
        break;
      case rules::token_verdict::duplicate:
      case rules::token_verdict::stale_worker:
        break;
      case rules::token_verdict::failed:
        FAIL("no event carries an error here");
      }
    }
    REQUIRE(taken.size() == total);
    for (uint32_t i = 0; i < total; ++i)
      REQUIRE(taken[i] == i);
  }
}

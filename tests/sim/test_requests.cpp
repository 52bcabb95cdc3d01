// Cross-node requests in virtual time: replies, remote errors, retries through lost
// messages, receiver de-duplication, deadlines, fast failure on peer death,
// stale incarnations.

#include <catch2/catch.hpp>

#include "prfaas/messages/remote_actor.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/examples.pb.h"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::errc;
using prfaas::test::sim_fixture;

namespace {

/// Counts how often its handler ran; answers Ping with Pong.
struct tally_state {
  static inline const char* name = "tally";
  uint64_t executed = 0;
};

prfaas::remote_actor::behavior_type
tally(prfaas::remote_actor::stateful_pointer<tally_state> self) {
  return {[self](prfaas::remote_message& m) -> caf::result<prfaas::remote_message> {
    ++self->state.executed;
    prfaas::examples::Pong pong;
    pong.set_sequence(self->state.executed);
    return prfaas::make_reply(m, pong);
  }};
}

/// Accepts requests and never answers (a hung peer).
struct blackhole_state {
  std::vector<caf::response_promise> held;
};

caf::behavior blackhole(caf::stateful_actor<blackhole_state>* self) {
  return {[self](prfaas::remote_message&) -> caf::result<prfaas::remote_message> {
    auto rp = self->make_response_promise();
    self->state.held.push_back(rp);
    return caf::delegated<prfaas::remote_message>{};
  }};
}

prfaas::actor_registry test_registry() {
  auto r = prfaas::actor_registry::with_builtins();
  r.add({"tally",
         "counts request executions",
         {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return caf::actor_cast<caf::actor>(ctx.system().spawn(tally));
         }});
  r.add({"blackhole",
         "never answers",
         {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return ctx.system().spawn(blackhole);
         }});
  return r;
}

// Re-sends every 100 ms (no back-off): the retry tests below count them.
const char* two_nodes = R"(
deployment: requests
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
transport: { retry_interval: 100ms, max_retry_interval: 100ms, request_timeout: 2s }
nodes:
  - { name: a, control: "tcp://127.0.0.1:7100", data: "tcp://127.0.0.1:7200" }
  - name: b
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: echo, name: echo }
      - { type: tally, name: tally }
      - { type: blackhole, name: hole }
)";

/// Both nodes started and past their first heartbeats.
struct two_nodes_up : sim_fixture {
  two_nodes_up() : sim_fixture(two_nodes, test_registry()) {
    start("a");
    start("b");
    advance(200ms);
  }
};

prfaas::remote_message ping_to(const std::string& node, const std::string& actor, uint64_t seq,
                               std::string data = "hello") {
  prfaas::examples::Ping ping;
  ping.set_sequence(seq);
  ping.set_data(std::move(data));
  return prfaas::make_remote(prfaas::address{"a", "client"}, prfaas::address{node, actor}, ping);
}

uint64_t executed(sim_fixture& f) {
  auto h = f.at("b").context().msgr().lookup("tally");
  return prfaas::test::state_of<tally_state, prfaas::remote_actor::base>(h).executed;
}

} // namespace

TEST_CASE("a request gets its reply across nodes") {
  two_nodes_up f;
  auto out = f.request("a", ping_to("b", "echo", 7, "abc"), 1s);
  f.advance(10ms);
  REQUIRE(out->done);
  REQUIRE(out->reply);
  prfaas::examples::Pong pong;
  REQUIRE(prfaas::parse_remote(*out->reply, pong));
  CHECK(pong.sequence() == 7);
  CHECK(pong.data() == "abc");
  CHECK(pong.responder() == "b/echo");
  CHECK(pong.incarnation() == f.at("b").incarnation());
}

TEST_CASE("bulk frames travel beside the envelope") {
  two_nodes_up f;
  std::string blob(1 << 20, 'x');
  for (size_t i = 0; i < blob.size(); i += 4096)
    blob[i] = static_cast<char>(i / 4096);
  auto msg = ping_to("b", "echo", 1);
  msg.bulk = prfaas::make_bulk(blob);
  auto out = f.request("a", std::move(msg), 1s);
  f.advance(10ms);
  REQUIRE(out->reply);
  REQUIRE(out->reply->bulk);
  std::string back(reinterpret_cast<const char*>(out->reply->bulk->data()),
                   out->reply->bulk->size());
  CHECK(back == blob);
}

TEST_CASE("remote errors come back as errors") {
  two_nodes_up f;
  SECTION("unknown actor") {
    auto out = f.request("a", ping_to("b", "nobody", 1), 1s);
    f.advance(10ms);
    REQUIRE(out->done);
    CHECK(prfaas::error_code(out->error) == errc::unknown_actor);
    CHECK_THAT(prfaas::describe(out->error), Catch::Matchers::Contains("no actor nobody on b"));
  }
  SECTION("unknown payload type") {
    prfaas::examples::Crash wrong;
    auto msg =
        prfaas::make_remote(prfaas::address{"a", "client"}, prfaas::address{"b", "echo"}, wrong);
    auto out = f.request("a", std::move(msg), 1s);
    f.advance(10ms);
    REQUIRE(out->done);
    CHECK(prfaas::error_code(out->error) == errc::unknown_type);
    CHECK(f.at("b").node_metrics()->counter_value(
              "prfaas_transport_dropped_total",
              {{"reason", "unknown_type"}, {"direction", "out"}}) == 1);
  }
  SECTION("node outside the deployment") {
    auto out = f.request("a", ping_to("zz", "echo", 1), 1s);
    f.advance(10ms);
    REQUIRE(out->done);
    CHECK(prfaas::error_code(out->error) == errc::unreachable);
  }
}

TEST_CASE("lost replies are retried and the handler runs once") {
  two_nodes_up f;
  f.net().block("b", "a"); // replies (and b's heartbeats) are lost
  auto out = f.request("a", ping_to("b", "tally", 1), 2s);
  f.advance(350ms); // the first send and three probes reach b
  CHECK_FALSE(out->done);
  CHECK(executed(f) == 1);
  f.net().unblock("b", "a");
  f.advance(150ms); // the next probe gets the cached answer
  REQUIRE(out->done);
  REQUIRE(out->reply);
  CHECK(executed(f) == 1);
  auto& am = *f.at("a").node_metrics();
  CHECK(am.counter_value("prfaas_transport_retries_total") >= 3);
  // b holds the request, so no retry carried it again: they only asked after it.
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "probe"}}) >= 3);
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "payload"}}) == 0);
}

TEST_CASE("a request held by a slow handler is probed, never re-sent with its payload") {
  two_nodes_up f;
  auto out = f.request("a", ping_to("b", "hole", 1, std::string(4096, 'p')), 1500ms);
  f.advance(1400ms); // ~13 probes at the fixed 100 ms
  CHECK_FALSE(out->done);
  auto& am = *f.at("a").node_metrics();
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "probe"}}) >= 10);
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "payload"}}) == 0);
  // b answered each probe: in progress.
  CHECK(am.counter_value("prfaas_transport_progress_total") >= 10);
  f.advance(200ms);
  REQUIRE(out->done);
  CHECK(prfaas::error_code(out->error) == errc::request_timeout);
}

TEST_CASE("a request lost on its way is found missing by a probe and sent again, once") {
  two_nodes_up f;
  f.net().block("a", "b");
  auto out = f.request("a", ping_to("b", "tally", 1), 2s);
  f.advance(50ms); // the request is lost
  f.net().unblock("a", "b");
  f.advance(150ms); // the probe at +100 ms: b holds nothing, so a sends it again
  REQUIRE(out->done);
  REQUIRE(out->reply);
  CHECK(executed(f) == 1);
  auto& am = *f.at("a").node_metrics();
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "probe"}}) == 1);
  CHECK(am.counter_value("prfaas_transport_request_resends_total", {{"kind", "payload"}}) == 1);
}

TEST_CASE("re-sends back off, doubling from retry_interval up to max_retry_interval") {
  std::string cfg = two_nodes;
  const std::string fixed = "max_retry_interval: 100ms, request_timeout: 2s";
  cfg.replace(cfg.find(fixed), fixed.size(), "max_retry_interval: 800ms, request_timeout: 10s");
  // b must not declare a down during the 3 s block: it would tell a, which then fails
  // its requests to b at once (fencing) — not what this test measures.
  const std::string detector = "misses: 5,";
  cfg.replace(cfg.find(detector), detector.size(), "misses: 100,");
  sim_fixture f{cfg, test_registry()};
  f.start("a");
  f.start("b");
  f.advance(200ms);
  f.net().block("a", "b"); // every copy of the request is lost
  auto retries = [&] {
    return f.at("a").node_metrics()->counter_value("prfaas_transport_retries_total");
  };
  const double before = retries();
  auto out = f.request("a", ping_to("b", "tally", 1), 10s);
  // Re-sent at +100, +300, +700, +1500 ms, then every 800 ms: +2300, +3100, ...
  f.advance(150ms);
  CHECK(retries() - before == 1);
  f.advance(200ms); // +350
  CHECK(retries() - before == 2);
  f.advance(400ms); // +750
  CHECK(retries() - before == 3);
  f.advance(800ms); // +1550
  CHECK(retries() - before == 4);
  f.advance(1600ms); // +3150: two more at the cap
  CHECK(retries() - before == 6);
  // It still gets through once the path is back, at the next re-send.
  f.net().unblock("a", "b");
  f.advance(800ms);
  REQUIRE(out->done);
  CHECK(out->reply);
  CHECK(executed(f) == 1);
}

TEST_CASE("lost requests are retried until they get through") {
  two_nodes_up f;
  f.net().block("a", "b");
  auto out = f.request("a", ping_to("b", "tally", 1), 2s);
  f.advance(250ms);
  CHECK(executed(f) == 0);
  f.net().unblock("a", "b");
  f.advance(150ms);
  REQUIRE(out->done);
  CHECK(out->reply);
  CHECK(executed(f) == 1);
}

TEST_CASE("a request with no answer ends at its deadline") {
  two_nodes_up f;
  auto start = f.now();
  auto out = f.request("a", ping_to("b", "hole", 1), 400ms);
  f.advance(399ms);
  CHECK_FALSE(out->done);
  f.advance(2ms);
  REQUIRE(out->done);
  CHECK(prfaas::error_code(out->error) == errc::request_timeout);
  CHECK(f.now() - start <= 401ms);
  CHECK(f.at("a").node_metrics()->counter_value("prfaas_transport_request_timeouts_total") == 1);
}

TEST_CASE("requests to a peer that dies fail when it is declared down") {
  two_nodes_up f;
  auto out = f.request("a", ping_to("b", "hole", 1), 30s);
  f.advance(50ms);
  f.crash("b");
  f.advance(700ms); // well before the 30 s deadline
  REQUIRE(out->done);
  CHECK(prfaas::error_code(out->error) == errc::peer_down);
  // New requests to the dead peer fail at once.
  auto again = f.request("a", ping_to("b", "echo", 2), 30s);
  REQUIRE(again->done);
  CHECK(prfaas::error_code(again->error) == errc::peer_down);
}

TEST_CASE("retries meant for a previous incarnation are not run by its successor") {
  sim_fixture f{two_nodes, test_registry()};
  f.start("a");
  auto old_inc = f.start("b").incarnation();
  f.advance(200ms);
  f.net().block("a", "b"); // the first attempt is lost
  auto out = f.request("a", ping_to("b", "tally", 1), 3s);
  f.advance(50ms);
  f.crash("b");
  // a cannot hear the new b, so it keeps retrying towards the old incarnation.
  f.net().block("b", "a");
  f.start("b", old_inc + 1);
  f.net().unblock("a", "b");
  f.advance(300ms);
  // The retries carry b's old incarnation: the new b drops them as stale ...
  CHECK(executed(f) == 0);
  CHECK(f.at("b").node_metrics()->counter_value(
            "prfaas_transport_dropped_total",
            {{"reason", "stale_incarnation"}, {"direction", "in"}}) >= 2);
  INFO(prfaas::describe(out->error));
  CHECK_FALSE(out->done);
  // ... and the request ends when a gives up on the old incarnation.
  f.advance(500ms);
  REQUIRE(out->done);
  CHECK(prfaas::error_code(out->error) == errc::peer_down);
  CHECK(executed(f) == 0);
}

TEST_CASE("frames from an incarnation older than one already heard are dropped (fencing)") {
  two_nodes_up f;
  // The old a's message is slow on the way; a is replaced before it lands.
  f.net().set_latency("a", "b", 2s);
  prfaas::send_remote(f.at("a").context(), ping_to("b", "tally", 1));
  f.advance(10ms);
  f.crash("a");
  f.net().set_latency("a", "b", 1ms);
  f.start("a"); // a higher incarnation
  f.advance(300ms);
  prfaas::send_remote(f.at("a").context(), ping_to("b", "tally", 2));
  f.advance(50ms);
  CHECK(executed(f) == 1);
  // The predecessor's frame arrives after its successor spoke: dropped and counted,
  // never run (a one-way carries no destination incarnation to catch it otherwise).
  f.advance(2s);
  CHECK(executed(f) == 1);
  CHECK(f.at("b").node_metrics()->counter_value(
            "prfaas_transport_dropped_total", {{"reason", "stale_source"}, {"direction", "in"}}) >=
        1);
}

TEST_CASE("a node declared down learns it, and its frames wait for its acknowledgement") {
  two_nodes_up f;
  const auto& b_metrics = *f.at("b").node_metrics();
  const auto fenced_drops = [&] {
    return b_metrics.counter_value("prfaas_transport_dropped_total",
                                   {{"reason", "fenced"}, {"direction", "in"}});
  };
  // b stops hearing a (one way): b declares a down and gives up on it; a, alive and
  // hearing b, does not know.
  f.net().block("a", "b");
  f.advance(700ms);
  f.net().unblock("a", "b");
  // What a sends before it learned is work b gave up on: dropped and counted, not run.
  prfaas::send_remote(f.at("a").context(), ping_to("b", "tally", 1));
  f.advance(5ms);
  CHECK(executed(f) == 0);
  CHECK(fenced_drops() == 1);
  // b's heartbeats tell a (a counts it once); a's next ones acknowledge, and b lifts
  // the fence: a is up at b again and its frames run.
  f.advance(500ms);
  CHECK(f.at("a").node_metrics()->counter_value("prfaas_transport_fenced_total") == 1);
  CHECK(b_metrics.counter_value("prfaas_transport_fenced_total") == 0);
  prfaas::send_remote(f.at("a").context(), ping_to("b", "tally", 2));
  f.advance(50ms);
  CHECK(executed(f) == 1);
  CHECK(fenced_drops() == 1);
}

TEST_CASE("one-way messages reach the actor directly") {
  two_nodes_up f;
  for (int i = 0; i < 10; ++i)
    prfaas::send_remote(f.at("a").context(), ping_to("b", "tally", i));
  f.advance(10ms);
  CHECK(executed(f) == 10);
  // One-way to an unknown actor is counted on arrival.
  prfaas::send_remote(f.at("a").context(), ping_to("b", "nobody", 1));
  f.advance(10ms);
  CHECK(f.at("b").node_metrics()->counter_value(
            "prfaas_transport_dropped_total", {{"reason", "unknown_actor"}, {"direction", "in"}}) ==
        1);
}

TEST_CASE("outstanding requests fail at once if the transport actor ends") {
  two_nodes_up f;
  auto out = f.request("a", ping_to("b", "hole", 1), 30s);
  f.advance(10ms);
  REQUIRE_FALSE(out->done);
  // The transport actor owns the request timers: without it nothing would end the
  // request, so the messenger ends it now instead of leaving it to hang.
  caf::anon_send_exit(f.at("a").transport(), caf::exit_reason::kill);
  f.run();
  REQUIRE(out->done);
  CHECK(prfaas::error_code(out->error) == errc::shutting_down);
  CHECK(f.at("a").context().msgr().pending_outbound() == 0);
}

TEST_CASE("one request timer serves requests with different deadlines") {
  two_nodes_up f;
  auto slow = f.request("a", ping_to("b", "hole", 1), 2s);
  f.advance(10ms);
  // Due before the armed timer (first re-send of `slow` at +100 ms): re-arms it.
  auto fast = f.request("a", ping_to("b", "hole", 2), 50ms);
  f.advance(49ms);
  CHECK_FALSE(fast->done);
  f.advance(2ms);
  REQUIRE(fast->done);
  CHECK(prfaas::error_code(fast->error) == errc::request_timeout);
  CHECK_FALSE(slow->done);
  // The slow one is still re-sent every 100 ms and ends exactly at its deadline.
  f.advance(1900ms);
  CHECK_FALSE(slow->done);
  CHECK(f.at("a").node_metrics()->counter_value("prfaas_transport_retries_total") >= 18);
  f.advance(100ms);
  REQUIRE(slow->done);
  CHECK(prfaas::error_code(slow->error) == errc::request_timeout);
  CHECK(f.at("a").context().msgr().pending_outbound() == 0);
}

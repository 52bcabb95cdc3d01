// Supervision in virtual time: one-for-one restarts, restart policies, the
// intensity/period bound (OTP semantics), escalation, ordered shutdown.

#include <catch2/catch.hpp>

#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/supervisor.hpp"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;

namespace {

std::string one_node(const std::string& supervision, const std::string& actors) {
  return "deployment: sup\n"
         "supervision: " +
         supervision +
         "\n"
         "nodes:\n"
         "  - name: n0\n"
         "    control: tcp://127.0.0.1:7100\n"
         "    data: tcp://127.0.0.1:7200\n"
         "    actors:\n" +
         actors;
}

std::vector<prfaas::child_status> children(sim_fixture& f, const std::string& node) {
  std::vector<prfaas::child_status> out;
  caf::scoped_actor self{f.system()};
  auto h = self->request(f.at(node).supervisor(), caf::infinite, prfaas::children_atom_v);
  f.run();
  h.receive([&](std::vector<prfaas::child_status>& kids) { out = std::move(kids); },
            [](caf::error&) { FAIL("supervisor did not answer"); });
  return out;
}

const prfaas::child_status& child(const std::vector<prfaas::child_status>& kids,
                                  const std::string& name) {
  for (auto& k : kids)
    if (k.name == name)
      return k;
  throw std::runtime_error("no child " + name);
}

} // namespace

TEST_CASE("a crashing actor is restarted and keeps its address") {
  sim_fixture f{one_node("{ intensity: 5, period: 10s }",
                         "      - { type: crashy, name: c, crash_after: 1s }\n"
                         "      - { type: echo, name: e }\n")};
  auto& n = f.start("n0");
  auto first = n.context().msgr().lookup("c");
  REQUIRE(first);
  f.advance(1500ms);
  auto kids = children(f, "n0");
  CHECK(child(kids, "c").restarts == 1);
  CHECK(child(kids, "c").running);
  CHECK(child(kids, "e").restarts == 0); // one-for-one: the sibling is untouched
  auto second = n.context().msgr().lookup("c");
  REQUIRE(second);
  CHECK(second != first);
  CHECK(n.node_metrics()->counter_value("prfaas_supervisor_restarts_total", {{"actor", "c"}}) == 1);
  CHECK_FALSE(n.escalated());
}

TEST_CASE("crashes within the intensity bound never escalate") {
  // One crash per second, at most 3 restarts per 2.5 s: at any moment the window
  // holds at most 3 restarts, so this loop may run forever.
  sim_fixture f{one_node("{ intensity: 3, period: 2500ms }",
                         "      - { type: crashy, name: c, crash_after: 1s }\n")};
  auto& n = f.start("n0");
  f.advance(60s);
  CHECK_FALSE(n.escalated());
  auto kids = children(f, "n0");
  CHECK(child(kids, "c").restarts >= 59);
  CHECK(child(kids, "c").running);
}

TEST_CASE("exceeding the restart intensity escalates") {
  sim_fixture f{one_node("{ intensity: 3, period: 10s }",
                         "      - { type: crashy, name: c, crash_after: 1s }\n"
                         "      - { type: crashy, name: ticker, tick: 100ms }\n")};
  auto& n = f.start("n0");
  f.advance(3500ms);
  CHECK_FALSE(n.escalated()); // three restarts so far
  f.advance(1s);              // the fourth crash within 10 s
  REQUIRE(n.escalated());
  CHECK_THAT(n.escalation_reason(),
             Catch::Matchers::Contains("escalated") &&
                 Catch::Matchers::Contains("child c crashed more than 3 times"));
  // Escalation stops every child, including the one with a re-arming timer.
  CHECK_FALSE(n.context().msgr().lookup("ticker"));
  CHECK(n.node_metrics()->counter_value("prfaas_supervisor_escalations_total") == 1);
}

TEST_CASE("restart policies follow OTP") {
  sim_fixture f{
      one_node("{ intensity: 10, period: 10s }",
               "      - { type: crashy, name: perm, crash_after: 1s }\n"
               "      - { type: crashy, name: trans, restart: transient, crash_after: 1s }\n"
               "      - { type: crashy, name: temp, restart: temporary, crash_after: 1s }\n")};
  f.start("n0");
  f.advance(1500ms);
  auto kids = children(f, "n0");
  CHECK(child(kids, "perm").running);
  CHECK(child(kids, "trans").running); // a crash restarts a transient child
  CHECK_FALSE(child(kids, "temp").running);
  CHECK(child(kids, "temp").restarts == 0);
}

TEST_CASE("restart backoff delays the restart") {
  sim_fixture f{one_node("{ intensity: 5, period: 10s, backoff: 500ms }",
                         "      - { type: crashy, name: c, crash_after: 1s }\n")};
  auto& n = f.start("n0");
  f.advance(1200ms);
  CHECK_FALSE(n.context().msgr().lookup("c")); // crashed, waiting out the backoff
  f.advance(400ms);
  CHECK(n.context().msgr().lookup("c"));
}

TEST_CASE("a node with re-arming timers stops completely") {
  sim_fixture f{one_node("{ intensity: 5, period: 10s }",
                         "      - { type: crashy, name: a, tick: 10ms }\n"
                         "      - { type: crashy, name: b, tick: 10ms }\n")};
  auto& n = f.start("n0");
  f.advance(1s);
  auto sup = n.supervisor();
  auto a = n.context().msgr().lookup("a");
  auto b = n.context().msgr().lookup("b");
  REQUIRE(a);
  REQUIRE(b);
  n.stop();
  n.stop(); // idempotent
  f.drain();
  // Everything is gone: the supervisor, both children and the transport.
  CHECK(caf::actor_cast<caf::abstract_actor*>(sup)->getf(caf::abstract_actor::is_terminated_flag));
  CHECK(caf::actor_cast<caf::abstract_actor*>(a)->getf(caf::abstract_actor::is_terminated_flag));
  CHECK(caf::actor_cast<caf::abstract_actor*>(b)->getf(caf::abstract_actor::is_terminated_flag));
  CHECK_FALSE(f.sched().has_pending_timeout());
}

// Failure detection in virtual time: heartbeats, suspect/down within the configured
// bound, restarts recognised as new incarnations, events to subscribers.

#include <catch2/catch.hpp>

#include "prfaas/runtime/errors.hpp"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::peer_state;
using prfaas::test::sim_fixture;

namespace {

const char* three_nodes = R"(
deployment: members
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
nodes:
  - { name: a, control: "tcp://127.0.0.1:7100", data: "tcp://127.0.0.1:7200" }
  - { name: b, control: "tcp://127.0.0.1:7101", data: "tcp://127.0.0.1:7201" }
  - { name: c, control: "tcp://127.0.0.1:7102", data: "tcp://127.0.0.1:7202" }
)";

std::vector<prfaas::peer_view> peers(sim_fixture& f, const std::string& node) {
  std::vector<prfaas::peer_view> out;
  caf::scoped_actor self{f.system()};
  auto h = self->request(f.at(node).transport(), caf::infinite, prfaas::peers_atom_v);
  f.run();
  h.receive([&](std::vector<prfaas::peer_view>& v) { out = std::move(v); },
            [](caf::error&) { FAIL("transport did not answer"); });
  return out;
}

prfaas::peer_view view_of(sim_fixture& f, const std::string& node, const std::string& peer) {
  for (auto& p : peers(f, node))
    if (p.node == peer)
      return p;
  throw std::runtime_error("no peer " + peer);
}

/// Records every membership event it receives, with the virtual time.
struct recorder_state {
  std::vector<std::pair<prfaas::membership_event, std::chrono::steady_clock::time_point>> events;
};

caf::behavior recorder(caf::stateful_actor<recorder_state>* self) {
  return {[self](const prfaas::membership_event& ev) {
    self->state.events.emplace_back(ev, self->clock().now());
  }};
}

} // namespace

TEST_CASE("peers come up after the first heartbeat") {
  sim_fixture f{three_nodes};
  f.start("a");
  f.start("b");
  f.start("c");
  f.advance(150ms);
  for (auto n : {"a", "b", "c"})
    for (auto& p : peers(f, n)) {
      INFO(n << " sees " << p.node);
      CHECK(p.state == peer_state::up);
      CHECK(p.incarnation == f.at(p.node).incarnation());
    }
  CHECK(f.at("a").node_metrics()->counter_value("prfaas_transport_heartbeats_sent_total") > 0);
}

TEST_CASE("a crashed peer is reported down within interval times misses") {
  sim_fixture f{three_nodes};
  f.start("a");
  f.start("b");
  f.start("c");
  auto rec = f.system().spawn(recorder);
  caf::anon_send(f.at("a").transport(), caf::subscribe_atom_v, rec);
  f.advance(300ms);
  auto killed_at = f.now();
  f.crash("c");
  // Suspect after 2 missed intervals, down after 5 (100 ms each), judged on the
  // detector's 100 ms ticks.
  f.advance(350ms);
  CHECK(view_of(f, "a", "c").state == peer_state::suspect);
  CHECK(view_of(f, "b", "c").state == peer_state::suspect);
  f.advance(300ms);
  CHECK(view_of(f, "a", "c").state == peer_state::down);
  CHECK(view_of(f, "b", "c").state == peer_state::down);
  CHECK(view_of(f, "a", "b").state == peer_state::up);
  auto& events = prfaas::test::state_of<recorder_state>(rec).events;
  auto down = std::find_if(events.begin(), events.end(), [](auto& e) {
    return e.first.peer == "c" && e.first.state == peer_state::down;
  });
  REQUIRE(down != events.end());
  auto detection = down->second - killed_at;
  CHECK(detection >= 500ms);         // never before the configured bound
  CHECK(detection <= 500ms + 100ms); // at most one interval of slack
  caf::anon_send_exit(rec, caf::exit_reason::user_shutdown);
}

TEST_CASE("a restarted peer rejoins as a new incarnation") {
  sim_fixture f{three_nodes};
  f.start("a");
  auto old_inc = f.start("b").incarnation();
  f.advance(300ms);
  REQUIRE(view_of(f, "a", "b").state == peer_state::up);
  auto rec = f.system().spawn(recorder);
  caf::anon_send(f.at("a").transport(), caf::subscribe_atom_v, rec);
  f.run();
  // Crash and restart faster than the detector can notice: the higher incarnation
  // alone tells a that b restarted.
  f.crash("b");
  auto new_inc = f.start("b", old_inc + 100).incarnation();
  f.advance(300ms);
  auto v = view_of(f, "a", "b");
  CHECK(v.state == peer_state::up);
  CHECK(v.incarnation == new_inc);
  auto& events = prfaas::test::state_of<recorder_state>(rec).events;
  std::vector<std::pair<peer_state, uint64_t>> seen;
  for (auto& [ev, _] : events)
    if (ev.peer == "b")
      seen.emplace_back(ev.state, ev.incarnation);
  // The subscriber starts with b up (old), then sees the old incarnation go down
  // and the new one come up.
  REQUIRE(seen.size() >= 3);
  CHECK(seen[0] == std::make_pair(peer_state::up, old_inc));
  CHECK(std::find(seen.begin(), seen.end(), std::make_pair(peer_state::down, old_inc)) !=
        seen.end());
  CHECK(seen.back() == std::make_pair(peer_state::up, new_inc));
  caf::anon_send_exit(rec, caf::exit_reason::user_shutdown);
}

TEST_CASE("a two-way partition takes peers down and healing brings them back") {
  sim_fixture f{three_nodes};
  f.start("a");
  f.start("b");
  f.start("c");
  f.advance(300ms);
  f.net().partition("a", "b");
  f.advance(700ms);
  CHECK(view_of(f, "a", "b").state == peer_state::down);
  CHECK(view_of(f, "b", "a").state == peer_state::down);
  CHECK(view_of(f, "a", "c").state == peer_state::up);
  f.net().heal("a", "b");
  // Two heartbeats each way: the first tells each side that the other declared it down
  // (fencing), the second acknowledges; only then is the other side up again.
  f.advance(100ms);
  CHECK(view_of(f, "a", "b").state == peer_state::down);
  f.advance(200ms);
  CHECK(view_of(f, "a", "b").state == peer_state::up);
  CHECK(view_of(f, "b", "a").state == peer_state::up);
  for (auto n : {"a", "b"})
    CHECK(f.at(n).node_metrics()->counter_value("prfaas_transport_fenced_total") == 1);
  CHECK(f.at("c").node_metrics()->counter_value("prfaas_transport_fenced_total") == 0);
}

TEST_CASE("a one-way partition is seen only by the side that stops hearing") {
  sim_fixture f{three_nodes};
  f.start("a");
  f.start("b");
  f.advance(300ms);
  f.net().block("a", "b"); // b no longer hears a; a still hears b
  f.advance(700ms);
  CHECK(view_of(f, "b", "a").state == peer_state::down);
  CHECK(view_of(f, "a", "b").state == peer_state::up);
}

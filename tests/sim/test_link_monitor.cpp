// Link monitors in virtual time, one at each end of the prfaas—pd link (no data plane
// in simulation: RTT and liveness only): the state published to subscribers, a
// partition that takes the link degraded then down within its bound, a heal that
// brings it up after the dwell time, and no flapping under alternating single probe
// losses.

#include <catch2/catch.hpp>

#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/link.pb.h"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;
namespace lk = prfaas::link;

namespace {

/// Records every LinkState it is sent, with the virtual time.
struct recorder_state {
  static inline const char* name = "link_recorder";
  std::vector<std::pair<lk::LinkState, std::chrono::steady_clock::time_point>> seen;
};

caf::behavior link_recorder(caf::stateful_actor<recorder_state>* self, prfaas::node_context* ctx) {
  return {[=](prfaas::remote_message& m) -> caf::result<prfaas::remote_message> {
    lk::LinkState st;
    if (!prfaas::parse_remote(m, st))
      return prfaas::unknown_type(*ctx, m);
    self->state.seen.emplace_back(std::move(st), self->clock().now());
    return prfaas::remote_message{};
  }};
}

prfaas::actor_registry test_registry() {
  auto r = prfaas::actor_registry::with_builtins();
  r.add({"link_recorder",
         "records LinkState",
         {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return ctx.system().spawn(link_recorder, &ctx);
         }});
  return r;
}

std::string yaml_for(const std::string& probe_timeout) {
  const std::string lm = "probe_interval: 100ms, probe_timeout: " + probe_timeout +
                         ", down_after: 1s, recover_dwell: 2s, publish_interval: 1s";
  return R"(
deployment: links
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
transport: { retry_interval: 100ms, request_timeout: 2s }
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [prfaas, pd], rate: 1gbit }
nodes:
  - name: p0
    cluster: prfaas
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: link_recorder, name: rec }
      - { type: link_monitor, name: lm, peer_cluster: pd, )" +
         lm + R"( }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: link_recorder, name: rec }
      - { type: link_monitor, name: lm, peer_cluster: prfaas, subscribers: "d0/rec", )" +
         lm + R"( }
)";
}

using time_point = std::chrono::steady_clock::time_point;

recorder_state& recorder(sim_fixture& f, const std::string& node) {
  return prfaas::test::state_of<recorder_state>(f.at(node).context().msgr().lookup("rec"));
}

/// The state changes a recorder saw after `from` (repeats of the same state collapsed).
std::vector<std::pair<lk::Condition, time_point>> changes(sim_fixture& f, const std::string& node,
                                                          time_point from) {
  std::vector<std::pair<lk::Condition, time_point>> out;
  lk::Condition last = lk::LINK_UNKNOWN;
  for (auto& [st, at] : recorder(f, node).seen) {
    if (st.state() != last && at >= from)
      out.emplace_back(st.state(), at);
    last = st.state();
  }
  return out;
}

lk::Condition latest(sim_fixture& f, const std::string& node) {
  auto& seen = recorder(f, node).seen;
  return seen.empty() ? lk::LINK_UNKNOWN : seen.back().first.state();
}

double probes(sim_fixture& f, const std::string& node, const std::string& outcome) {
  const bool prfaas_side = node == "p0";
  return f.at(node).node_metrics()->counter_value("prfaas_link_probes_total",
                                                  {{"cluster", prfaas_side ? "prfaas" : "pd"},
                                                   {"peer_cluster", prfaas_side ? "pd" : "prfaas"},
                                                   {"outcome", outcome}});
}

struct link_up : sim_fixture {
  explicit link_up(const std::string& probe_timeout = "200ms")
      : sim_fixture(yaml_for(probe_timeout), test_registry()) {
    start("p0");
    start("d0");
    started = now();
    advance(1s);
  }
  time_point started;
};

} // namespace

TEST_CASE(
    "subscribers get the link's state: configured ones pushed and Subscribe answered at once") {
  link_up f;
  REQUIRE(latest(f, "d0") == lk::LINK_UP);
  auto& first = recorder(f, "d0").seen.front().first;
  CHECK(first.cluster() == "pd");
  CHECK(first.peer_cluster() == "prfaas");
  CHECK(first.monitor_node() == "d0");
  CHECK(first.capacity_bps() == Approx(1e9)); // the deployment's links[].rate
  CHECK(first.rtt_ms() == Approx(2.0));       // 1 ms each way in the sim network
  CHECK(first.utilisation() == 0.0);          // no data plane in simulation
  // A subscriber on p0 asks; the reply is the current state.
  lk::Subscribe sub;
  sub.set_node("p0");
  sub.set_actor("rec");
  auto out = f.request("p0", prfaas::make_remote({"p0", "rec"}, {"p0", "lm"}, sub), 1s);
  f.advance(5ms);
  REQUIRE(out->reply);
  lk::LinkState now;
  REQUIRE(prfaas::parse_remote(*out->reply, now));
  CHECK(now.state() == lk::LINK_UP);
  CHECK(now.cluster() == "prfaas");
  // Up since its first answered probe (the first one, sent before the nodes heard
  // each other's heartbeats, may be lost), 1 s ago.
  CHECK(now.since_ms() >= 800);
  CHECK(now.since_ms() <= 1000);
  // Then pushes every publish interval.
  f.advance(2100ms);
  CHECK(recorder(f, "p0").seen.size() >= 2);
  CHECK(latest(f, "p0") == lk::LINK_UP);
  CHECK(f.at("d0").node_metrics()->counter_value("prfaas_link_state_changes_total",
                                                 {{"cluster", "pd"}, {"peer_cluster", "prfaas"}}) ==
        1);
}

TEST_CASE("a partition takes the link degraded then down within its bound and a heal brings it up "
          "after the dwell") {
  link_up f;
  REQUIRE(latest(f, "d0") == lk::LINK_UP);
  const auto cut = f.now();
  f.net().partition("p0", "d0");
  f.advance(3s);
  auto seen = changes(f, "d0", cut);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == lk::LINK_DEGRADED);
  CHECK(seen[1].first == lk::LINK_DOWN);
  // down_after (1 s) from the last answer, which came within one probe interval
  // before the cut; judged at least once per probe interval.
  CHECK(seen[1].second >= cut + 1s - 100ms);
  CHECK(seen[1].second <= cut + 1s + 100ms);
  CHECK(seen[0].second < seen[1].second);
  CHECK(latest(f, "d0") == lk::LINK_DOWN);
  const auto healed = f.now();
  f.net().heal("p0", "d0");
  f.advance(5s);
  seen = changes(f, "d0", healed);
  REQUIRE(seen.size() == 1); // straight back up: no detour through degraded
  CHECK(seen[0].first == lk::LINK_UP);
  // recover_dwell (2 s) of answered probes, the first of which goes out within a probe
  // interval of the heal (or once the failure detector sees the peer again).
  CHECK(seen[0].second >= healed + 2s);
  CHECK(seen[0].second <= healed + 2s + 400ms);
}

TEST_CASE("alternating single probe losses do not flap the link") {
  link_up f{"50ms"};
  REQUIRE(latest(f, "d0") == lk::LINK_UP);
  const double lost_before = probes(f, "d0", "lost");
  const double answered_before = probes(f, "d0", "answered");
  const auto from = f.now();
  // Probes go out every 100 ms from the monitors' start. Every other one is sent into
  // a short partition (it times out after 50 ms); the ones between get through.
  auto tick = f.started;
  while (tick <= f.now())
    tick += 100ms;
  for (int i = 0; i < 40; ++i, tick += 200ms) {
    f.advance(tick - 20ms - f.now());
    f.net().partition("p0", "d0");
    f.advance(80ms);
    f.net().heal("p0", "d0");
  }
  f.advance(tick + 50ms - f.now());
  CHECK(probes(f, "d0", "lost") - lost_before >= 38);
  CHECK(probes(f, "d0", "answered") - answered_before >= 38);
  auto seen = changes(f, "d0", from);
  CHECK(seen.size() <= 1); // at most up → degraded (50 % loss), and it stays there
  for (auto& [c, at] : seen)
    CHECK(c != lk::LINK_DOWN);
}

// The scheduler reacting to link state, in virtual time: link monitors at both ends of
// the prfaas—pd link publish to the scheduler (their `subscribers`); while the link is
// down, long prompts are no longer offloaded and go to the PD cluster's prefill worker;
// when the monitors see the link back, offload resumes. The failure detector is set
// far slower than the monitors so that only the link state can explain the switch.

#include <catch2/catch.hpp>

#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/serving.pb.h"
#include "prfaas/wire/link.pb.h"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;
namespace sv = prfaas::serving;

namespace {

/// Stands in for a worker: the scheduler only polls it (and gets no load back).
caf::behavior stub_worker(caf::event_based_actor*) {
  return {[](prfaas::remote_message&) -> caf::result<prfaas::remote_message> {
    return prfaas::remote_message{};
  }};
}

prfaas::actor_registry test_registry() {
  auto r = prfaas::actor_registry::with_builtins();
  r.add({"stub_worker", "answers nothing useful", {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return ctx.system().spawn(stub_worker);
         }});
  return r;
}

const std::string yaml = R"(
deployment: scheduler-link
failure_detector: { interval: 100ms, misses: 200, suspect_misses: 100 }
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
      - { type: stub_worker, name: pf }
      - { type: link_monitor, name: lm, peer_cluster: pd, probe_interval: 100ms, probe_timeout: 200ms,
          down_after: 1s, recover_dwell: 2s, publish_interval: 1s }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: scheduler, name: sched, threshold: 100, prefill_types: stub_worker,
          decode_types: stub_decode }
      - { type: stub_worker, name: pdp }
      - { type: stub_decode, name: dec }
      - { type: link_monitor, name: lm, peer_cluster: prfaas, probe_interval: 100ms,
          probe_timeout: 200ms, down_after: 1s, recover_dwell: 2s, publish_interval: 1s,
          subscribers: d0/sched }
)";

prfaas::actor_registry registry_with_decode() {
  auto r = test_registry();
  r.add({"stub_decode", "answers nothing useful", {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return ctx.system().spawn(stub_worker);
         }});
  return r;
}

/// Where the scheduler sends a prompt of `tokens` tokens now.
std::string route(sim_fixture& f, uint32_t tokens) {
  sv::RouteQuery q;
  q.set_request_id("r" + std::to_string(tokens));
  q.set_prompt_tokens(tokens);
  auto out = f.request("d0", prfaas::make_remote({"d0", "test"}, {"d0", "sched"}, q), 1s);
  f.advance(5ms);
  REQUIRE(out->reply);
  sv::RouteDecision d;
  REQUIRE(prfaas::parse_remote(*out->reply, d));
  return d.route() + ":" + d.prefill_node();
}

double link_up_gauge(sim_fixture& f) {
  auto text = f.at("d0").node_metrics()->serialize();
  auto at = text.find("\nprfaas_scheduler_link_up{");
  REQUIRE(at != std::string::npos);
  auto line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

} // namespace

TEST_CASE("link down stops new offloads, the link back resumes them") {
  sim_fixture f{yaml, registry_with_decode()};
  f.start("p0");
  f.start("d0");
  f.advance(1s);
  CHECK(route(f, 500) == "prfaas:p0"); // longer than the threshold: offloaded
  CHECK(route(f, 50) == "pd:d0");      // short: local
  CHECK(link_up_gauge(f) == 1);

  f.net().partition("p0", "d0");
  f.advance(1500ms); // monitors: down after 1 s without an answer
  CHECK(route(f, 500) == "pd:d0"); // the threshold is effectively infinite now
  CHECK(route(f, 50) == "pd:d0");
  CHECK(link_up_gauge(f) == 0);

  f.net().heal("p0", "d0");
  f.advance(1s); // up again only after the recovery dwell (2 s)
  CHECK(route(f, 500) == "pd:d0");
  f.advance(2s);
  CHECK(route(f, 500) == "prfaas:p0");
  CHECK(link_up_gauge(f) == 1);
}

namespace {

// The prfaas policy with its short-term controller; the link monitor's reports come
// from the test (it speaks the monitor's protocol: LinkState to the subscriber).
const std::string controller_yaml = R"(
deployment: scheduler-controller
failure_detector: { interval: 100ms, misses: 200, suspect_misses: 100 }
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
      - { type: stub_worker, name: pf }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: scheduler, name: sched, policy: prfaas, threshold: 1000, max_threshold: 60000,
          retune_interval: 2s, control_window: 10s, prefill_types: stub_worker,
          # the stubs report no load, so routed tokens pile up as PrfaaS queue: keep the
          # queue signal out of the way, this test is about the link's
          scarce_queue_tokens: 1000000000, abundant_queue_tokens: 1000000000,
          decode_types: stub_decode }
      - { type: stub_worker, name: pdp }
      - { type: stub_decode, name: dec }
)";

/// What a link monitor on the PrfaaS side would publish.
void publish(sim_fixture& f, prfaas::link::Condition state, double throughput_bps,
             uint64_t backlog_bytes) {
  prfaas::link::LinkState st;
  st.set_cluster("prfaas");
  st.set_peer_cluster("pd");
  st.set_state(state);
  st.set_capacity_bps(1e9);
  st.set_throughput_bps(throughput_bps);
  st.set_utilisation(throughput_bps / 1e9);
  st.set_backlog_bytes(backlog_bytes);
  auto out = f.request("d0", prfaas::make_remote({"d0", "lm"}, {"d0", "sched"}, st), 1s);
  f.advance(1ms);
  REQUIRE(out->done);
}

double gauge(sim_fixture& f, const std::string& name) {
  auto text = f.at("d0").node_metrics()->serialize();
  auto at = text.find("\n" + name + "{");
  REQUIRE(at != std::string::npos);
  auto line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

} // namespace

TEST_CASE("a backed-up link makes bandwidth scarce and raises t at the next decision; "
          "a drained one restores the planned t") {
  sim_fixture f{controller_yaml, registry_with_decode()};
  f.start("p0");
  f.start("d0");
  f.advance(1s);
  // Abundant: 20000-token prompts are offloaded (the planned t is 1000), ten a second.
  for (int i = 0; i < 20; ++i) {
    CHECK(route(f, 20000) == "prfaas:p0");
    f.advance(100ms);
  }
  CHECK(gauge(f, "prfaas_scheduler_threshold_tokens") == 1000);
  CHECK(gauge(f, "prfaas_scheduler_bandwidth_scarce") == 0);

  // The link is cut far below its rate (a `tbf` change): it delivers 1 kbit/s and a
  // backlog piles up. The very next decision is scarce with a higher t, within the
  // configured bound, and the 20000-token prompts stay in the PD cluster.
  publish(f, prfaas::link::LINK_DEGRADED, 1000, 1u << 30);
  CHECK(route(f, 20000) == "pd:d0");
  const double raised = gauge(f, "prfaas_scheduler_threshold_tokens");
  CHECK(raised >= 20000);
  CHECK(raised <= 60000);
  CHECK(gauge(f, "prfaas_scheduler_bandwidth_scarce") == 1);
  // Beyond the bound a prompt still goes across: the link is slow, not down.
  CHECK(route(f, 70000) == "prfaas:p0");

  // Down: nothing is offloaded at any length.
  publish(f, prfaas::link::LINK_DOWN, 0, 1u << 30);
  CHECK(route(f, 70000) == "pd:d0");

  // Back up and drained: abundant again, the planned t, offload resumes.
  publish(f, prfaas::link::LINK_UP, 1e8, 0);
  CHECK(route(f, 20000) == "prfaas:p0");
  CHECK(gauge(f, "prfaas_scheduler_threshold_tokens") == 1000);
  CHECK(gauge(f, "prfaas_scheduler_bandwidth_scarce") == 0);
}

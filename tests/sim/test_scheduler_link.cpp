// The scheduler reacting to link state, in virtual time: link monitors at both ends of
// the prfaas—pd link publish to the scheduler (their `subscribers`); while the link is
// down, long prompts are no longer offloaded and go to the PD cluster's prefill worker;
// when the monitors see the link back, offload resumes. The failure detector is set
// far slower than the monitors so that only the link state can explain the switch.

#include <catch2/catch.hpp>

#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/serving.pb.h"
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

// The scheduler reacting to link state, in virtual time: link monitors at both ends of
// the prfaas—pd link publish to the scheduler (their `subscribers`); while the link is
// down, long prompts are no longer offloaded and go to the PD cluster's prefill worker;
// when the monitors see the link back, offload resumes. With links to two PrfaaS
// clusters, each link's state is published on its own. The failure detector is set
// far slower than the monitors so that only the link state can explain the switch.

#include <algorithm>
#include <sstream>

#include <catch2/catch.hpp>

#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/scheduler.pb.h"
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
  r.add({"stub_worker",
         "answers nothing useful",
         {},
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
  r.add({"stub_decode",
         "answers nothing useful",
         {},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
           return ctx.system().spawn(stub_worker);
         }});
  return r;
}

/// The scheduler `sched` on `node` decides for a prompt of `tokens` tokens now.
sv::RouteDecision decide(sim_fixture& f, const std::string& node, uint32_t tokens) {
  sv::RouteQuery q;
  q.set_request_id("r" + std::to_string(tokens));
  q.set_prompt_tokens(tokens);
  auto out = f.request(node, prfaas::make_remote({node, "test"}, {node, "sched"}, q), 1s);
  f.advance(5ms);
  REQUIRE(out->reply);
  sv::RouteDecision d;
  REQUIRE(prfaas::parse_remote(*out->reply, d));
  return d;
}

/// Where the scheduler on d0 sends a prompt of `tokens` tokens now.
std::string route(sim_fixture& f, uint32_t tokens) {
  auto d = decide(f, "d0", tokens);
  return d.route() + ":" + d.prefill_node();
}

/// The sample of `name` on `node` carrying `labels` (as printed, e.g. `role="prefill"`);
/// -1 if there is none.
double metric_of(sim_fixture& f, const std::string& node, const std::string& name,
                 const std::string& labels = {}) {
  std::istringstream text{f.at(node).node_metrics()->serialize()};
  for (std::string line; std::getline(text, line);)
    if (line.rfind(name + "{", 0) == 0 && line.find(labels) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

double link_up_gauge(sim_fixture& f) {
  return metric_of(f, "d0", "prfaas_scheduler_link_up");
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
  f.advance(1500ms);               // monitors: down after 1 s without an answer
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

/// Two nodes, p0 in a PrfaaS cluster and d0 in a PD cluster, joined by a link of
/// `rate`; each node's actor entries as YAML lines ("      - { type: ... }\n").
std::string two_clusters(const std::string& name, const std::string& rate,
                         const std::string& p0_actors, const std::string& d0_actors) {
  return "deployment: " + name + R"(
failure_detector: { interval: 100ms, misses: 200, suspect_misses: 100 }
transport: { retry_interval: 100ms, request_timeout: 2s }
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [prfaas, pd], rate: )" +
         rate + R"( }
nodes:
  - name: p0
    cluster: prfaas
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
)" + p0_actors +
         R"(  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
)" + d0_actors;
}

// The prfaas policy with its short-term controller; the link monitor's reports come
// from the test (it speaks the monitor's protocol: LinkState to the subscriber).
const std::string controller_yaml = two_clusters(
    "scheduler-controller", "1gbit", "      - { type: stub_worker, name: pf }\n",
    R"(      - { type: scheduler, name: sched, policy: prfaas, threshold: 1000, max_threshold: 60000,
          retune_interval: 2s, control_window: 10s, prefill_types: stub_worker,
          # the stubs report no load, so routed tokens pile up as PrfaaS queue: keep the
          # queue signal out of the way, this test is about the link's
          scarce_queue_tokens: 1000000000, abundant_queue_tokens: 1000000000,
          decode_types: stub_decode }
      - { type: stub_worker, name: pdp }
      - { type: stub_decode, name: dec }
)");

/// What the monitor on PrfaaS cluster `from`'s side publishes about its link to pd.
void publish_from(sim_fixture& f, const std::string& from, prfaas::link::Condition state,
                  double capacity_bps, double throughput_bps, uint64_t backlog_bytes) {
  prfaas::link::LinkState st;
  st.set_cluster(from);
  st.set_peer_cluster("pd");
  st.set_state(state);
  st.set_capacity_bps(capacity_bps);
  st.set_throughput_bps(throughput_bps);
  st.set_utilisation(throughput_bps / capacity_bps);
  st.set_backlog_bytes(backlog_bytes);
  auto out = f.request("d0", prfaas::make_remote({"d0", "lm"}, {"d0", "sched"}, st), 1s);
  f.advance(1ms);
  REQUIRE(out->done);
}

/// What a link monitor on the PrfaaS side would publish (a 1 Gbit/s link).
void publish(sim_fixture& f, prfaas::link::Condition state, double throughput_bps,
             uint64_t backlog_bytes) {
  publish_from(f, "prfaas", state, 1e9, throughput_bps, backlog_bytes);
}

double gauge(sim_fixture& f, const std::string& name) {
  return metric_of(f, "d0", name);
}

} // namespace

TEST_CASE("a backed-up link makes bandwidth scarce and raises t at the next decision, "
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
  // backlog piles up. Once two reports in a row show it, the next decision is scarce
  // with a higher t, within the configured bound, and the 20000-token prompts stay in
  // the PD cluster.
  publish(f, prfaas::link::LINK_DEGRADED, 1000, 1u << 30);
  CHECK(route(f, 20000) == "prfaas:p0"); // one report of a backlog is not yet a backed-up link
  f.advance(1s);
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

  // Back up and drained: abundant again, offload resumes, and t halves back to the
  // planned one, a step per retune interval.
  publish(f, prfaas::link::LINK_UP, 1e8, 0);
  f.advance(2s);
  CHECK(route(f, 20000) == "prfaas:p0");
  CHECK(gauge(f, "prfaas_scheduler_bandwidth_scarce") == 0);
  double last = gauge(f, "prfaas_scheduler_threshold_tokens");
  CHECK(last < raised);
  for (int i = 0; i < 10 && last > 1000; ++i) {
    f.advance(2s);
    route(f, 20000);
    const double now = gauge(f, "prfaas_scheduler_threshold_tokens");
    CHECK(now < last);
    last = now;
  }
  CHECK(last == 1000);
}

namespace {

// The long-term controller through the scheduler actor: a PD cluster of one prefill
// node and two convertible nodes (prefill worker on standby, decode worker serving).
// The workers answer LoadQuery with what the test sets in `loads` (by "node/actor").
std::map<std::string, sv::WorkerLoad> loads;

caf::behavior loaded_worker(caf::event_based_actor*, std::string key) {
  return {[key](prfaas::remote_message& msg) -> caf::result<prfaas::remote_message> {
    return prfaas::make_reply(msg, loads[key]);
  }};
}

prfaas::actor_registry loaded_registry() {
  auto r = prfaas::actor_registry::with_builtins();
  for (const char* type : {"loaded_prefill", "loaded_decode"})
    r.add({type,
           "answers LoadQuery with the test's figures",
           {},
           [](prfaas::node_context& ctx, const std::string& name, const prfaas::actor_params&) {
             return ctx.system().spawn(loaded_worker, ctx.node() + "/" + name);
           }});
  return r;
}

const std::string roles_yaml = R"(
deployment: scheduler-roles
failure_detector: { interval: 100ms, misses: 200, suspect_misses: 100 }
transport: { retry_interval: 100ms, request_timeout: 2s }
clusters:
  pd: { kind: pd }
nodes:
  - name: a
    cluster: pd
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: scheduler, name: sched, policy: prfaas, threshold: 1000, load_interval: 100ms,
          prefill_types: loaded_prefill, decode_types: loaded_decode, standby: "b/pdp,c/pdp",
          convert_interval: 1s, convert_cooldown: 10s, convert_high: 0.8, convert_low: 0.4,
          prefill_full_tokens: 1000 }
      - { type: loaded_prefill, name: pdp }
  - name: b
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: loaded_prefill, name: pdp }
      - { type: loaded_decode, name: dec }
  - name: c
    cluster: pd
    control: "tcp://127.0.0.1:7102"
    data: "tcp://127.0.0.1:7202"
    actors:
      - { type: loaded_prefill, name: pdp }
      - { type: loaded_decode, name: dec }
)";

sv::WorkerLoad load(uint32_t queue, uint32_t active, uint32_t capacity, uint64_t tokens) {
  sv::WorkerLoad l;
  l.set_queue_depth(queue);
  l.set_active(active);
  l.set_capacity(capacity);
  l.set_queued_tokens(tokens);
  return l;
}

double scheduler_metric(sim_fixture& f, const std::string& name, const std::string& labels) {
  return metric_of(f, "a", name, labels);
}

/// The scheduler on `a`'s choice: "prefill node/actor+decode node".
std::string route_pd(sim_fixture& f, uint32_t tokens) {
  auto d = decide(f, "a", tokens);
  return d.prefill_node() + "/" + d.prefill_actor() + "+" + d.decode_node();
}

} // namespace

TEST_CASE(
    "long-term controller: an overloaded PD prefill stage gets a decode node, after it drained") {
  loads.clear();
  loads["a/pdp"] = load(5, 1, 64, 5000); // five times "full"
  loads["b/dec"] = load(0, 4, 10, 0);
  loads["c/dec"] = load(0, 1, 10, 0); // least busy decode node: converted
  sim_fixture f{roles_yaml, loaded_registry()};
  for (auto* n : {"a", "b", "c"})
    f.start(n);
  f.advance(500ms);
  CHECK(scheduler_metric(f, "prfaas_scheduler_pd_workers", "role=\"prefill\"") == 1);
  CHECK(scheduler_metric(f, "prfaas_scheduler_pd_workers", "role=\"decode\"") == 2);
  // Standby workers get nothing: prefill on a, decode on b or c.
  CHECK(route_pd(f, 10).rfind("a/pdp+", 0) == 0);

  f.advance(1500ms); // a tick judges the stages: c starts draining
  CHECK(scheduler_metric(f, "prfaas_scheduler_role_changes_total",
                         "phase=\"draining\",to=\"prefill\"") == 1);
  CHECK(route_pd(f, 10) == "a/pdp+b"); // no new decode work on c while it drains
  f.advance(3s);                       // c still has a sequence: not converted
  CHECK(scheduler_metric(f, "prfaas_scheduler_role_changes_total",
                         "phase=\"converted\",to=\"prefill\"") == -1);
  loads["c/dec"] = load(0, 0, 10, 0); // its last sequence finished
  f.advance(2s);
  CHECK(scheduler_metric(f, "prfaas_scheduler_role_changes_total",
                         "phase=\"converted\",to=\"prefill\"") == 1);
  CHECK(scheduler_metric(f, "prfaas_scheduler_pd_workers", "role=\"prefill\"") == 2);
  CHECK(scheduler_metric(f, "prfaas_scheduler_pd_workers", "role=\"decode\"") == 1);
  // c's prefill worker now takes work (a is loaded, c is empty); decode stays on b.
  CHECK(route_pd(f, 10) == "c/pdp+b");
}

namespace {

// Balancing through the scheduler actor: the workers report their queues and measured
// pace in their load reports (WorkerLoad.tokens_per_s); the scheduler polls them and its
// prfaas policy moves t toward the cluster that keeps up.
const std::string balance_yaml = two_clusters(
    "scheduler-balance", "100gbit", "      - { type: loaded_prefill, name: pf }\n",
    R"(      - { type: scheduler, name: sched, policy: prfaas, threshold: 16000, min_threshold: 2000,
          load_interval: 100ms, retune_interval: 2s, prefill_types: loaded_prefill,
          decode_types: loaded_decode }
      - { type: loaded_prefill, name: pdp }
      - { type: loaded_decode, name: dec }
)");

sv::WorkerLoad paced(uint64_t queued_tokens, double tokens_per_s) {
  auto l = load(queued_tokens > 0 ? 4 : 0, queued_tokens > 0 ? 1 : 0, 1000, queued_tokens);
  l.set_tokens_per_s(tokens_per_s);
  return l;
}

} // namespace

TEST_CASE(
    "balancing: a PD cluster that stays behind gets more offloaded, a PrfaaS side behind less") {
  loads.clear();
  loads["p0/pf"] = paced(0, 20000);      // PrfaaS idle
  loads["d0/pdp"] = paced(400000, 5000); // PD: 80 s of prefill queued
  loads["d0/dec"] = load(0, 0, 16, 0);
  sim_fixture f{balance_yaml, loaded_registry()};
  f.start("p0");
  f.start("d0");
  f.advance(500ms);
  const auto t_of = [&] { return metric_of(f, "d0", "prfaas_scheduler_threshold_tokens"); };
  // A 10000-token prompt is below the planned t: it stays in the PD cluster at first.
  CHECK(decide(f, "d0", 10000).route() == "pd");
  // The imbalance lasts: t comes down a step (1.25x) per retune interval, to its floor.
  std::vector<double> ts;
  for (int i = 0; i < 24; ++i) {
    f.advance(1s);
    decide(f, "d0", 10000);
    ts.push_back(t_of());
  }
  CHECK(ts.front() == 16000); // one second in: not yet a trend
  CHECK(std::is_sorted(ts.rbegin(), ts.rend()));
  CHECK(ts.back() == 2000); // min_threshold
  CHECK(decide(f, "d0", 10000).route() == "prfaas");
  // Each move is counted with its reason: all of these lowered t for the PD side.
  CHECK(metric_of(f, "d0", "prfaas_scheduler_threshold_changes_total", "reason=\"pd_behind\"") >=
        9);
  CHECK(metric_of(f, "d0", "prfaas_scheduler_threshold_changes_total",
                  "reason=\"prfaas_behind\"") == -1);
  CHECK(metric_of(f, "d0", "prfaas_scheduler_planned_threshold_tokens") == 16000);

  // The other way round: the PrfaaS side is behind, the PD cluster idles; t rises.
  loads["p0/pf"] = paced(2000000, 20000); // 100 s queued
  loads["d0/pdp"] = paced(0, 5000);
  const double low = t_of();
  for (int i = 0; i < 8; ++i) {
    f.advance(1s);
    decide(f, "d0", 10000);
  }
  CHECK(t_of() > low * 1.5);
  CHECK(metric_of(f, "d0", "prfaas_scheduler_threshold_changes_total",
                  "reason=\"prfaas_behind\"") >= 2);

  // Both keep up: t returns to the planned one, a doubling per retune interval.
  loads["p0/pf"] = paced(0, 20000);
  for (int i = 0; i < 20 && t_of() != 16000; ++i) {
    f.advance(1s);
    decide(f, "d0", 10000);
  }
  CHECK(t_of() == 16000);
  CHECK(metric_of(f, "d0", "prfaas_scheduler_threshold_changes_total", "reason=\"back_to_plan\"") >=
        1);
}

namespace {

// One PD cluster with links to two PrfaaS clusters (the three-dc shape): the scheduler
// publishes each link's state as it routes by it, labelled by the link's two clusters.
const std::string two_links_yaml = R"(
deployment: scheduler-two-links
failure_detector: { interval: 100ms, misses: 200, suspect_misses: 100 }
transport: { retry_interval: 100ms, request_timeout: 2s }
clusters:
  east: { kind: prefill-only }
  west: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [east, pd], rate: 1gbit }
  - { between: [west, pd], rate: 100mbit }
nodes:
  - name: e0
    cluster: east
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: stub_worker, name: pf }
  - name: w0
    cluster: west
    control: "tcp://127.0.0.1:7102"
    data: "tcp://127.0.0.1:7202"
    actors:
      - { type: stub_worker, name: pf }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: scheduler, name: sched, policy: prfaas, threshold: 1000, backlog_horizon: 10s,
          prefill_types: stub_worker, decode_types: stub_decode,
          scarce_queue_tokens: 1000000000, abundant_queue_tokens: 1000000000 }
      - { type: stub_worker, name: pdp }
      - { type: stub_decode, name: dec }
)";

double link_gauge(sim_fixture& f, const std::string& name, const std::string& prfaas_cluster) {
  return metric_of(f, "d0", "prfaas_scheduler_cluster_link_" + name,
                   "pd_cluster=\"pd\",prfaas_cluster=\"" + prfaas_cluster + "\"");
}

} // namespace

TEST_CASE("with two links the scheduler publishes each one's up, utilisation, queue and "
          "budget as it routes by them") {
  sim_fixture f{two_links_yaml, registry_with_decode()};
  f.start("e0");
  f.start("w0");
  f.start("d0");
  f.advance(1s);

  // east busy but keeping up (60%, no backlog); west idle.
  publish_from(f, "east", prfaas::link::LINK_UP, 1e9, 6e8, 0);
  publish_from(f, "west", prfaas::link::LINK_UP, 1e8, 0, 0);
  CHECK(link_gauge(f, "up", "east") == 1);
  CHECK(link_gauge(f, "up", "west") == 1);
  CHECK(link_gauge(f, "utilisation", "east") == Approx(0.6));
  CHECK(link_gauge(f, "utilisation", "west") == 0);
  CHECK(link_gauge(f, "queue_seconds", "east") == 0);
  CHECK(link_gauge(f, "over_budget", "east") == 0);

  // east backs up: 100 MB waiting at 0.5 Gbit/s is 1.6 s to drain, counted from the
  // second report in a row; with 0.5 utilisation and a 10 s horizon (0.16) it is still
  // within budget.
  publish_from(f, "east", prfaas::link::LINK_DEGRADED, 1e9, 5e8, 100'000'000);
  CHECK(link_gauge(f, "queue_seconds", "east") == 0); // one report is not yet a backlog
  publish_from(f, "east", prfaas::link::LINK_DEGRADED, 1e9, 5e8, 100'000'000);
  CHECK(link_gauge(f, "queue_seconds", "east") == Approx(1.6));
  CHECK(link_gauge(f, "utilisation", "east") == Approx(0.5));
  CHECK(link_gauge(f, "over_budget", "east") == 0);

  // Twice the backlog at full utilisation: over its budget, and a long prompt goes
  // west (within its budget) rather than east.
  publish_from(f, "east", prfaas::link::LINK_DEGRADED, 1e9, 1e9, 2'000'000'000);
  publish_from(f, "east", prfaas::link::LINK_DEGRADED, 1e9, 1e9, 2'000'000'000);
  CHECK(link_gauge(f, "queue_seconds", "east") == Approx(16.0));
  CHECK(link_gauge(f, "over_budget", "east") == 1);
  CHECK(link_gauge(f, "over_budget", "west") == 0);
  CHECK(route(f, 20000) == "prfaas:w0");

  // east down: its up gauge says so, and nothing goes there.
  publish_from(f, "east", prfaas::link::LINK_DOWN, 1e9, 0, 0);
  CHECK(link_gauge(f, "up", "east") == 0);
  CHECK(link_gauge(f, "up", "west") == 1);
  CHECK(route(f, 20000) == "prfaas:w0");
}

// Routing policies through the registry, as the scheduler makes them: the `threshold`
// policy's offload rule, failover restrictions, the fixed decode worker, why no route
// was found, and the least-loaded choices.

#include <algorithm>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "scheduler/policy.hpp"

using namespace prfaas::serving;
using Catch::Matchers::Contains;

namespace {

std::unique_ptr<routing_policy> threshold_policy(int64_t threshold) {
  prfaas::actor_params p{
      "nodes[0].actors[0]",
      {{"policy", YAML::Node("threshold")}, {"threshold", YAML::Node(threshold)}},
      nullptr};
  auto policy = policy_registry::instance().make("threshold", p);
  REQUIRE(policy);
  return policy;
}

worker_view worker(const std::string& node, const std::string& actor, bool prfaas = false) {
  worker_view w;
  w.addr = {node, actor};
  w.cluster = prfaas ? "prfaas" : "pd";
  w.prfaas = prfaas;
  return w;
}

/// One PrfaaS prefill worker (index 0), one PD prefill worker (index 1), one decode.
cluster_view two_clusters() {
  cluster_view v;
  v.prefill = {worker("prfaas-0", "p0", true), worker("pd-0", "pdp0")};
  v.decode = {worker("pd-0", "d0")};
  v.decode[0].capacity = 16;
  return v;
}

route_input prompt(uint32_t tokens) {
  route_input in;
  in.prompt_tokens = tokens;
  return in;
}

} // namespace

TEST_CASE("policies are made by name") {
  auto names = policy_registry::instance().names();
  CHECK(std::find(names.begin(), names.end(), "threshold") != names.end());
  prfaas::actor_params p{"s", {{"threshold", YAML::Node(1)}}, nullptr};
  CHECK_FALSE(policy_registry::instance().make("no-such-policy", p));
  CHECK(threshold_policy(1)->name() == "threshold");
  CHECK_THROWS_AS(policy_registry::instance().add("threshold", nullptr), std::invalid_argument);
}

TEST_CASE("threshold offloads iff the prompt is longer than the threshold") {
  auto policy = threshold_policy(100);
  auto v = two_clusters();
  auto at = policy->decide(prompt(100), v);
  CHECK(at.route == "pd");
  CHECK(at.prefill == 1);
  CHECK(at.decode == 0);
  CHECK(at.threshold == 100);
  CHECK(at.uncached_tokens == 100);
  CHECK(at.why_not.empty());
  auto over = policy->decide(prompt(101), v);
  CHECK(over.route == "prfaas");
  CHECK(over.prefill == 0);
  CHECK(over.decode == 0);
  CHECK(over.uncached_tokens == 101);
  auto tiny = threshold_policy(0)->decide(prompt(1), v);
  CHECK(tiny.route == "prfaas");
}

TEST_CASE("threshold keeps long prompts local when the link or the PrfaaS cluster is down") {
  auto policy = threshold_policy(100);
  auto v = two_clusters();
  v.link_up = false;
  auto link_down = policy->decide(prompt(5000), v);
  CHECK(link_down.route == "pd");
  CHECK(link_down.prefill == 1);

  v = two_clusters();
  v.prefill[0].up = false;
  auto worker_down = policy->decide(prompt(5000), v);
  CHECK(worker_down.route == "pd");
  CHECK(worker_down.prefill == 1);

  v = two_clusters();
  auto in = prompt(5000);
  in.local_only = true;
  auto local = policy->decide(in, v);
  CHECK(local.route == "pd");
  CHECK(local.prefill == 1);
}

TEST_CASE("threshold skips excluded nodes, and uses PrfaaS when no PD prefill is left") {
  auto policy = threshold_policy(100);
  auto v = two_clusters();
  auto in = prompt(5000);
  in.exclude_nodes = {"prfaas-0"};
  auto failover = policy->decide(in, v);
  CHECK(failover.route == "pd");
  CHECK(failover.prefill == 1);

  auto short_in = prompt(10);
  short_in.exclude_nodes = {"pd-0"};
  auto short_offloaded = policy->decide(short_in, v);
  CHECK(short_offloaded.route == "prfaas");
  CHECK(short_offloaded.prefill == 0);

  // ... unless the link is down or the request must stay local: then no route.
  v.link_up = false;
  auto none = policy->decide(short_in, v);
  CHECK(none.prefill == -1);
  CHECK(none.decode == -1);
  CHECK(none.route.empty());
  CHECK_THAT(none.why_not, Contains("no prefill worker is up"));

  v.link_up = true;
  short_in.local_only = true;
  auto local = policy->decide(short_in, v);
  CHECK(local.prefill == -1);
  CHECK(local.decode == -1);
  CHECK_THAT(local.why_not, Contains("no prefill worker"));

  auto both = prompt(5000);
  both.exclude_nodes = {"pd-0", "prfaas-0"};
  auto nothing = policy->decide(both, two_clusters());
  CHECK(nothing.prefill == -1);
  CHECK(nothing.decode == -1);
}

TEST_CASE("threshold keeps a fixed decode worker, or says it is not up") {
  auto policy = threshold_policy(100);
  auto v = two_clusters();
  v.decode.push_back(worker("pd-1", "d1"));
  v.decode[1].capacity = 16;
  v.decode[1].active = 15; // busier than d0: only chosen when fixed
  auto in = prompt(10);
  CHECK(policy->decide(in, v).decode == 0);
  in.decode_node = "pd-1";
  in.decode_actor = "d1";
  auto fixed = policy->decide(in, v);
  CHECK(fixed.decode == 1);
  CHECK(fixed.prefill == 1);
  // Same node, other actor: not a match.
  in.decode_actor = "d9";
  auto other = policy->decide(in, v);
  CHECK(other.decode == -1);
  CHECK(other.prefill == -1);
  CHECK(other.why_not == "decode worker pd-1/d9 is not up");

  in.decode_actor = "d1";
  v.decode[1].up = false;
  auto down = policy->decide(in, v);
  CHECK(down.decode == -1);
  CHECK(down.prefill == -1);
  CHECK(down.route.empty());
  CHECK(down.why_not == "decode worker pd-1/d1 is not up");
}

TEST_CASE("threshold without a decode worker says why") {
  auto policy = threshold_policy(100);
  auto v = two_clusters();
  v.decode[0].up = false;
  auto c = policy->decide(prompt(5000), v);
  CHECK(c.decode == -1);
  CHECK(c.prefill == -1);
  CHECK(c.route.empty());
  CHECK(c.why_not == "no decode worker is up and ready");
  v.decode.clear();
  CHECK(policy->decide(prompt(5), v).why_not == "no decode worker is up and ready");
}

TEST_CASE("the least-loaded prefill worker has the fewest pending tokens") {
  cluster_view v;
  v.prefill = {worker("a", "p", true), worker("b", "p", true), worker("c", "p", true),
               worker("local", "p")};
  v.prefill[0].queued_tokens = 500;
  v.prefill[1].queued_tokens = 100;
  v.prefill[1].assigned_tokens = 500; // reported little, but we sent it a lot since
  v.prefill[2].queued_tokens = 450;
  v.prefill[2].assigned_tokens = 100;
  v.decode = {worker("d", "d")};
  // pending: a 500, b 600, c 550
  CHECK(least_loaded_prefill(v, true, {}) == 0);
  CHECK(threshold_policy(10)->decide(prompt(11), v).prefill == 0);
  CHECK(least_loaded_prefill(v, true, {"a"}) == 2);
  CHECK(least_loaded_prefill(v, false, {}) == 3); // the PD side only
  v.prefill[0].up = false;
  CHECK(least_loaded_prefill(v, true, {}) == 2);
  // Equal pending tokens: the shorter queue (queue + assigned), then the first listed.
  v.prefill[2].queued_tokens = 500;
  v.prefill[2].assigned_tokens = 100;
  v.prefill[1].assigned_tokens = 500; // b: 600 too
  v.prefill[1].queue = 3;
  v.prefill[2].queue = 1;
  v.prefill[2].assigned = 1;
  CHECK(least_loaded_prefill(v, true, {}) == 2);
  v.prefill[2].assigned = 3;
  CHECK(least_loaded_prefill(v, true, {}) == 1);
  v.prefill[1].up = false;
  v.prefill[2].up = false;
  CHECK(least_loaded_prefill(v, true, {}) == -1);
}

TEST_CASE("the least-loaded decode worker has the lowest occupancy per capacity") {
  cluster_view v;
  v.decode = {worker("n", "d0"), worker("n", "d1"), worker("n", "d2")};
  v.decode[0].capacity = 4;
  v.decode[0].queue = 1;
  v.decode[0].active = 1; // 2/4
  v.decode[1].capacity = 16;
  v.decode[1].active = 4; // 4/16
  v.decode[2].capacity = 8;
  v.decode[2].active = 1;
  v.decode[2].assigned = 2; // 3/8
  CHECK(least_loaded_decode(v, "", "") == 1);
  v.decode[1].assigned = 6; // 10/16
  CHECK(least_loaded_decode(v, "", "") == 2);
  v.decode[2].up = false;
  CHECK(least_loaded_decode(v, "", "") == 0);
  v.decode[0].capacity = 0; // treated as 1: 2/1
  CHECK(least_loaded_decode(v, "", "") == 1);
  CHECK(least_loaded_decode(v, "n", "d2") == -1); // down
  CHECK(least_loaded_decode(v, "n", "d0") == 0);

  v.prefill = {worker("n", "p")};
  CHECK(threshold_policy(100)->decide(prompt(5), v).decode == 1);
}

TEST_CASE("a route stays booked against its worker until a report polled route_grace after it") {
  // The order travels from the gateway, the poll from the scheduler: a report answering
  // a poll sent just after a route may not include the order yet. Forgetting the route
  // then made the worker look idle, and the next request queued behind it.
  using namespace std::chrono_literals;
  auto w = worker("p0", "pf", true);
  const worker_view::time_point t0{};
  w.book(t0 + 10ms, 300);
  w.book(t0 + 40ms, 200);
  CHECK(w.assigned == 2);
  CHECK(w.pending_tokens() == 500);
  w.queued_tokens = 300;     // the report's own count (it did see the first order)
  w.settle(t0 + 45ms, 20ms); // polled 5 ms after the second route: it may be on its way
  CHECK(w.assigned == 1);
  CHECK(w.assigned_tokens == 200);
  CHECK(w.pending_tokens() == 500);
  w.queued_tokens = 500;
  w.settle(t0 + 60ms, 20ms); // polled 20 ms after it: the report includes it
  CHECK(w.assigned == 1);    // (not earlier than polled - grace: still counted)
  w.settle(t0 + 61ms, 20ms);
  CHECK(w.assigned == 0);
  CHECK(w.assigned_tokens == 0);
  CHECK(w.booked.empty());
  CHECK(w.pending_tokens() == 500);
}

// Several PrfaaS and PD clusters, from one PD cluster's scheduler: which workers it
// routes to (its own PD workers, the PrfaaS clusters linked to it), each link's state
// on its own (a report about another PD cluster's link changes nothing), and where the
// prfaas policy offloads when it has a choice of links (the one whose KV is ready
// soonest; never a link that is down, nor one over its budget while another is not; with
// `link_split: rate`, in proportion to the links' rates).

#include <algorithm>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "prfaas/runtime/config.hpp"
#include "scheduler/link_book.hpp"
#include "scheduler/prfaas_policy.hpp"

using namespace prfaas::serving;

namespace {

// east and west are PrfaaS clusters; pd1 reaches both, pd2 only east.
const char* two_by_two = R"(
deployment: t
model: { name: m, engine: profile }
clusters:
  east: { kind: prefill-only }
  west: { kind: prefill-only }
  pd1: { kind: pd }
  pd2: { kind: pd }
links:
  - { between: [east, pd1], rate: 100gbit }
  - { between: [west, pd1], rate: 20gbit }
  - { between: [east, pd2], rate: 5gbit }
nodes:
  - { name: e0, cluster: east, control: tcp://127.0.0.1:7000, data: tcp://127.0.0.1:7100 }
  - { name: w0, cluster: west, control: tcp://127.0.0.1:7001, data: tcp://127.0.0.1:7101 }
  - { name: a0, cluster: pd1, control: tcp://127.0.0.1:7002, data: tcp://127.0.0.1:7102 }
  - { name: b0, cluster: pd2, control: tcp://127.0.0.1:7003, data: tcp://127.0.0.1:7103 }
)";

worker_view worker(const std::string& node, const std::string& cluster, bool prfaas) {
  worker_view w;
  w.addr = {node, prfaas ? "pf" : "pdp"};
  w.cluster = cluster;
  w.prfaas = prfaas;
  w.tokens_per_s = 10000;
  return w;
}

/// Every worker of the deployment, as the scheduler starts from.
cluster_view whole() {
  cluster_view v;
  v.prefill = {worker("e0", "east", true), worker("w0", "west", true), worker("a0", "pd1", false),
               worker("b0", "pd2", false)};
  v.decode = {worker("a0", "pd1", false), worker("b0", "pd2", false)};
  for (auto& d : v.decode)
    d.capacity = 8;
  return v;
}

/// pd1's view of the deployment, its two links measured (east 100, west 20 Gbit/s), 1 MB
/// of KV per token.
cluster_view pd1_with_both_links() {
  auto v = whole();
  const auto dep = prfaas::parse_deployment(two_by_two, "<two-by-two>");
  link_book book(dep, "pd1", v);
  v.kv_bytes = [](uint64_t tokens) { return 1e6 * static_cast<double>(tokens); };
  v.links[0].capacity_bps = 100e9; // east
  v.links[1].capacity_bps = 20e9;  // west
  v.aggregate_links();
  return v;
}

std::vector<std::string> nodes(const std::vector<worker_view>& ws) {
  std::vector<std::string> out;
  for (auto& w : ws)
    out.push_back(w.addr.node);
  return out;
}

prfaas::link::LinkState report(const std::string& from, const std::string& to,
                               prfaas::link::Condition c) {
  prfaas::link::LinkState st;
  st.set_cluster(from);
  st.set_peer_cluster(to);
  st.set_state(c);
  return st;
}

const link_view& link_to(const cluster_view& v, const std::string& cluster) {
  auto it = std::find_if(v.links.begin(), v.links.end(),
                         [&](const link_view& l) { return l.cluster == cluster; });
  REQUIRE(it != v.links.end());
  return *it;
}

} // namespace

TEST_CASE("link_book: a PD cluster's scheduler routes to its own workers and the PrfaaS "
          "clusters linked to it",
          "[links]") {
  const auto dep = prfaas::parse_deployment(two_by_two, "<two-by-two>");
  auto v1 = whole();
  link_book b1(dep, "pd1", v1);
  CHECK(nodes(v1.prefill) == std::vector<std::string>{"e0", "w0", "a0"});
  CHECK(nodes(v1.decode) == std::vector<std::string>{"a0"});
  REQUIRE(v1.links.size() == 2);

  auto v2 = whole();
  link_book b2(dep, "pd2", v2);
  CHECK(nodes(v2.prefill) == std::vector<std::string>{"e0", "b0"}); // no link to west
  CHECK(nodes(v2.decode) == std::vector<std::string>{"b0"});
  REQUIRE(v2.links.size() == 1);
  CHECK(v2.links[0].cluster == "east");
}

TEST_CASE("link_book: each link's state is its own, and another PD cluster's link is not "
          "this one's",
          "[links]") {
  using prfaas::link::LINK_DOWN;
  using prfaas::link::LINK_UP;
  const auto dep = prfaas::parse_deployment(two_by_two, "<two-by-two>");
  auto v = whole();
  link_book book(dep, "pd1", v);

  // east's link to pd2 goes down: pd1 offloads to east as before.
  CHECK_FALSE(book.apply(report("east", "pd2", LINK_DOWN), v));
  CHECK(link_to(v, "east").up);
  CHECK(v.link_up);

  // east's link to pd1 goes down: that link only; offload is still possible over west.
  CHECK_FALSE(book.apply(report("pd1", "east", LINK_DOWN), v));
  CHECK_FALSE(link_to(v, "east").up);
  CHECK(link_to(v, "west").up);
  CHECK(v.link_up);
  CHECK_FALSE(v.offload_open(v.prefill[0])); // e0
  CHECK(v.offload_open(v.prefill[1]));       // w0

  // Both down: no offload at all (and the scheduler is told it changed).
  CHECK(book.apply(report("west", "pd1", LINK_DOWN), v));
  CHECK_FALSE(v.link_up);
  // east back (its monitor on the PD side reports it up): offload again.
  CHECK(book.apply(report("pd1", "east", LINK_UP), v));
  CHECK(link_to(v, "east").up);

  // Egress is measured on the PrfaaS side, per link; the aggregate sums the up links.
  auto st = report("east", "pd1", LINK_UP);
  st.set_capacity_bps(100e9);
  st.set_throughput_bps(50e9);
  st.set_utilisation(0.5);
  book.apply(st, v);
  auto sw = report("west", "pd1", LINK_UP);
  sw.set_capacity_bps(20e9);
  sw.set_utilisation(0.0);
  book.apply(sw, v);
  CHECK(link_to(v, "east").capacity_bps == 100e9);
  CHECK(link_to(v, "west").capacity_bps == 20e9);
  CHECK(v.link_capacity_bps == Approx(120e9));
  CHECK(v.link_throughput_bps == Approx(50e9));
  CHECK(v.link_utilisation == Approx(50.0 / 120.0));
}

TEST_CASE("prfaas policy with several links: the link whose KV is ready soonest, never a "
          "down one, an over-budget one only when all are",
          "[links]") {
  prfaas::actor_params p{"sched", {{"threshold", YAML::Node(1000)}}, nullptr};
  auto policy = policy_registry::instance().make("prfaas", p);
  REQUIRE(policy);
  auto v = pd1_with_both_links();
  route_input in;
  in.prompt_tokens = 8000;

  // Both idle, same pace: the faster link ships the KV sooner.
  auto c = policy->decide(in, v);
  REQUIRE(c.prefill >= 0);
  CHECK(c.route == "prfaas");
  CHECK(v.prefill[c.prefill].cluster == "east");

  // East has a queue whose KV keeps its link busy longer than west's would take.
  v.prefill[0].queued_tokens = 200000; // 20 s of compute and 16 s on the link
  c = policy->decide(in, v);
  CHECK(v.prefill[c.prefill].cluster == "west");
  v.prefill[0].queued_tokens = 0;

  // East down: west, whatever the rates.
  v.links[0].up = false;
  v.aggregate_links();
  c = policy->decide(in, v);
  CHECK(v.prefill[c.prefill].cluster == "west");

  // East up but over its budget while west is not: west.
  v.links[0].up = true;
  v.links[0].utilisation = 0.95;
  v.links[0].queue_seconds = 0.5;
  v.aggregate_links();
  CHECK(v.links[0].over_budget(v.link_budget_horizon));
  c = policy->decide(in, v);
  CHECK(v.prefill[c.prefill].cluster == "west");

  // Both over budget: the links give no reason to prefer either, so the choice is the
  // policy's as with one link (t answers the link), and a PrfaaS worker stays open.
  v.links[1].utilisation = 0.99;
  v.links[1].queue_seconds = 2;
  v.aggregate_links();
  CHECK(v.offload_open(v.prefill[0]));
  CHECK(v.offload_open(v.prefill[1]));
}

TEST_CASE("prfaas policy with link_split: rate: the links carry offloads' KV in proportion "
          "to their rates, whatever the queues, none while down and no catch-up after",
          "[links]") {
  prfaas::actor_params p{
      "sched", {{"threshold", YAML::Node(1000)}, {"link_split", YAML::Node("rate")}}, nullptr};
  auto policy = policy_registry::instance().make("prfaas", p);
  REQUIRE(policy);
  auto v = pd1_with_both_links();
  // East is idle and west has a queue: soonest would send everything east.
  v.prefill[1].queued_tokens = 100000;
  std::map<std::string, double> bytes;
  auto route = [&](uint32_t tokens) {
    route_input in;
    in.prompt_tokens = tokens;
    auto c = policy->decide(in, v);
    REQUIRE(c.prefill >= 0);
    REQUIRE(c.route == "prfaas");
    const auto& cluster = v.prefill[c.prefill].cluster;
    bytes[cluster] += v.kv_bytes(tokens);
    return cluster;
  };
  for (int i = 0; i < 60; ++i)
    route(i % 2 ? 8000 : 2000);
  // 100 : 20 Gbit/s: five sixths of the bytes east, within one prompt's KV.
  const double all = bytes["east"] + bytes["west"];
  CHECK(bytes["east"] == Approx(all * 5 / 6).margin(8e9));
  CHECK(bytes["west"] > 0);

  // East down: west takes every offload.
  v.links[0].up = false;
  v.aggregate_links();
  for (int i = 0; i < 12; ++i)
    CHECK(route(4000) == "west");
  // Back up: the split resumes at 5 : 1 from there (10 of 12, give or take the tie at
  // the turn), with no burst to make up for the time it was down.
  v.links[0].up = true;
  v.aggregate_links();
  int east = 0;
  for (int i = 0; i < 12; ++i)
    east += route(4000) == "east" ? 1 : 0;
  CHECK(east >= 9);
  CHECK(east <= 11);

  // Behind the chosen link, the worker whose KV is ready soonest: a second east worker
  // with an empty queue takes east's offloads while the first has a queue.
  v.prefill.push_back(worker("e1", "east", true));
  v.prefill[0].queued_tokens = 50000;
  for (int i = 0; i < 12; ++i) {
    route_input in;
    in.prompt_tokens = 4000;
    auto c = policy->decide(in, v);
    REQUIRE(c.prefill >= 0);
    CHECK(v.prefill[c.prefill].addr.node != "e0");
  }

  prfaas::actor_params bad{
      "sched", {{"threshold", YAML::Node(1000)}, {"link_split", YAML::Node("even")}}, nullptr};
  CHECK_THROWS_WITH(policy_registry::instance().make("prfaas", bad),
                    Catch::Contains("link_split must be soonest or rate"));
}

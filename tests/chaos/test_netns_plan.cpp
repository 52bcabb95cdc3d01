// The chaos harness's network, planned from a deployment, and the rules of its faults:
// a namespace and address per node, a switch per cluster, a veth per declared link;
// blackhole rules that can match only the pairs they name (and the imprecise ones of
// the negative control that can match more); verdicts from the fault's own counters.

#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "netns_plan.hpp"
#include "nft_rules.hpp"
#include "report.hpp"

using namespace prfaas::chaos;

namespace {

const char* three_clusters = R"(
deployment: t
model: { name: m, engine: profile }
clusters: { east: { kind: prefill-only }, west: { kind: prefill-only }, pd: { kind: pd } }
links:
  - { between: [east, pd], rate: 1gbit }
  - { between: [west, pd], rate: 100mbit }
nodes:
  - { name: e0, cluster: east, control: tcp://127.0.0.1:7000, data: tcp://127.0.0.1:7100, admin: 127.0.0.1:9000 }
  - { name: e1, cluster: east, control: tcp://127.0.0.1:7001, data: tcp://127.0.0.1:7101, admin: 127.0.0.1:9001 }
  - { name: w0, cluster: west, control: tcp://127.0.0.1:7002, data: tcp://127.0.0.1:7102, admin: 127.0.0.1:9002 }
  - name: gw
    cluster: pd
    control: tcp://127.0.0.1:7003
    data: tcp://127.0.0.1:7103
    admin: 127.0.0.1:9003
    actors: [ { type: gateway, name: gw, listen: 127.0.0.1:8000 } ]
  - { name: d0, cluster: pd, control: tcp://127.0.0.1:7004, data: tcp://127.0.0.1:7104, admin: 127.0.0.1:9004 }
)";

netns_plan plan() {
  return plan_netns(prfaas::parse_deployment(three_clusters, "<three>"), "9");
}

bool has_command(const netns_plan& p, std::vector<std::string> cmd) {
  return std::find(p.setup.begin(), p.setup.end(), cmd) != p.setup.end();
}

fault_spec blackhole(std::string from, std::vector<std::string> to, bool both) {
  fault_spec f;
  f.kind = fault_kind::blackhole;
  f.from = std::move(from);
  f.to = std::move(to);
  f.both_ways = both;
  return f;
}

node_address addr(const std::string& n) {
  static const std::map<std::string, node_address> m{{"a", {"10.77.1.1", 7000, 7100}},
                                                     {"b", {"10.77.1.2", 7001, 7101}},
                                                     {"c", {"10.77.2.1", 7002, 7102}}};
  return m.at(n);
}

/// A report with one request, completed: whatever fails it is a fault's verdict.
report one_clean_request() {
  report r;
  r.scenario = "s";
  r.requests.sent = 1;
  r.requests.completed = 1;
  return r;
}

} // namespace

TEST_CASE("netns plan: a namespace and an address per node, a switch per cluster") {
  auto p = plan();
  REQUIRE(p.nodes.size() == 5);
  REQUIRE(p.clusters.size() == 3);
  std::set<std::string> ips, namespaces;
  for (auto& n : p.nodes) {
    ips.insert(n.ip);
    namespaces.insert(n.ns);
    CHECK(n.switch_ns == p.cluster(n.cluster).ns);
  }
  CHECK(ips.size() == 5);
  CHECK(namespaces.size() == 5);
  // Same cluster, same subnet and switch; another cluster, another subnet.
  CHECK(p.node("e0").ip == "10.77.1.1");
  CHECK(p.node("e1").ip == "10.77.1.2");
  CHECK(p.node("w0").ip == "10.77.2.1");
  CHECK(p.node("d0").ip == "10.77.3.2");
  CHECK(p.node("e0").switch_ns == p.node("e1").switch_ns);
  CHECK(p.node("e0").switch_ns != p.node("gw").switch_ns);
  // Teardown removes every namespace the setup adds.
  size_t added = std::count_if(p.setup.begin(), p.setup.end(), [](auto& c) {
    return c.size() == 4 && c[1] == "netns" && c[2] == "add";
  });
  CHECK(added == p.namespaces.size());
  CHECK(p.namespaces.size() == 8);
  // A node's default route goes through its cluster's switch.
  CHECK(has_command(p, {"ip", "-n", p.node("w0").ns, "route", "add", "default", "via",
                        "10.77.2.254", "dev", "eth0"}));
}

TEST_CASE("netns plan: each declared link is its own veth with its own rate and routes") {
  auto p = plan();
  REQUIRE(p.links.size() == 2);
  auto* east = p.link_between("pd", "east");
  auto* west = p.link_between("west", "pd");
  REQUIRE(east);
  REQUIRE(west);
  CHECK(p.link_between("east", "west") == nullptr); // not declared: no route either
  CHECK(east->dev != west->dev);
  CHECK(east->rate == "1000000000bit");
  CHECK(west->rate == "100000000bit");
  for (auto* l : {east, west})
    for (auto& ns : {l->ns_a, l->ns_b})
      CHECK(has_command(p, {"nsenter", "--net=/var/run/netns/" + ns, "--", "tc", "qdisc", "add",
                            "dev", l->dev, "root", "tbf", "rate", l->rate, "burst", "256kb",
                            "latency", "50ms"}));
  // Both ends route to the other side's subnet; link_down's undo re-installs them.
  REQUIRE(west->routes.size() == 2);
  CHECK(west->routes[0] == std::vector<std::string>{"ip", "-n", west->ns_a, "route", "replace",
                                                    "10.77.3.0/24", "via", "10.78.2.2"});
  CHECK(west->routes[1] == std::vector<std::string>{"ip", "-n", west->ns_b, "route", "replace",
                                                    "10.77.2.0/24", "via", "10.78.2.1"});
  bool east_west_route = std::any_of(p.setup.begin(), p.setup.end(), [&](auto& c) {
    return c.size() > 5 && c[2] == p.cluster("east").ns && c[5] == "10.77.2.0/24";
  });
  CHECK_FALSE(east_west_route);
}

TEST_CASE("netns plan: the deployment is rewritten onto the planned addresses, ports kept") {
  auto p = plan();
  auto text = place_deployment(three_clusters, "<three>", p);
  auto d = prfaas::parse_deployment(text, "<placed>");
  CHECK(d.find_node("e1")->control == "tcp://10.77.1.2:7001");
  CHECK(d.find_node("e1")->data == "tcp://10.77.1.2:7101");
  CHECK(d.find_node("e1")->admin == "10.77.1.2:9001");
  CHECK(d.find_node("gw")->actors.at(0).params["listen"].as<std::string>() == "10.77.3.1:8000");
}

TEST_CASE("netns plan: a node without a cluster is refused by name") {
  auto d = prfaas::parse_deployment(R"(
deployment: t
model: { name: m, engine: profile }
nodes:
  - { name: lone, control: tcp://127.0.0.1:7000, data: tcp://127.0.0.1:7100 }
)",
                                    "<lone>");
  CHECK_THROWS_WITH(plan_netns(d, "1"), Catch::Contains("lone") && Catch::Contains("cluster"));
}

TEST_CASE("blackhole rules name both ends, the imprecise ones of the control do not") {
  for (bool both : {false, true}) {
    auto f = blackhole("a", {"c"}, both);
    auto precise = plan_blackhole(f, addr, true);
    CHECK(matches_only_named(precise));
    REQUIRE(precise.drops.size() == 2);
    CHECK(precise.drops[0].saddr == "10.77.1.1");
    CHECK(precise.drops[0].daddr == "10.77.2.1");
    // One way: the connections `a` opened (either direction of them), not c's own.
    CHECK(precise.drops[0].ct_direction == (both ? "" : "original"));
    CHECK(precise.drops[1].ct_direction == (both ? "" : "reply"));

    auto imprecise = plan_blackhole(f, addr, false);
    CHECK_FALSE(matches_only_named(imprecise)); // b -> c would be cut too
  }
  auto text =
      render_forward_table("t0", plan_blackhole(blackhole("a", {"b", "c"}, true), addr, true));
  CHECK_THAT(text, Catch::Contains("hook forward"));
  CHECK_THAT(text, Catch::Contains("ip saddr 10.77.1.1 ip daddr 10.77.1.2 counter drop"));
  CHECK_THAT(text, Catch::Contains("ip saddr . ip daddr != { 10.77.1.1 . 10.77.1.2, 10.77.1.2 . "
                                   "10.77.1.1, 10.77.1.1 . 10.77.2.1, 10.77.2.1 . 10.77.1.1 }"));
}

TEST_CASE("rule counters are read from nft JSON by comment, garbage is refused") {
  const char* listing = R"({"nftables": [{"metainfo": {"version": "1.0.6"}},
    {"rule": {"comment": "collateral", "expr": [{"counter": {"packets": 3, "bytes": 180}}]}},
    {"rule": {"comment": "drop", "expr": [{"counter": {"packets": 40, "bytes": 4000}}, {"drop": null}]}},
    {"rule": {"comment": "drop", "expr": [{"counter": {"packets": 2, "bytes": 100}}, {"drop": null}]}}]})";
  auto c = read_counts(listing);
  CHECK(c.dropped == 42);
  CHECK(c.collateral == 3);
  CHECK_THROWS_WITH(read_counts("Error: No such file"), Catch::Contains("not an nft JSON"));
}

TEST_CASE("a rate cut that never bound is 'no effect observed', not a missed detection") {
  fault_spec f;
  f.kind = fault_kind::rate;
  f.rate = "8mbit";
  f.lasts = seconds{5};
  f.detect_within = seconds{3};
  detection none;

  auto idle = judge(f, 5, 10, none, {}, link_usage{120'000, 0});
  CHECK(idle.no_effect);
  CHECK(idle.detect_ok);

  auto busy = judge(f, 5, 10, none, {}, link_usage{8'000'000, 900});
  CHECK_FALSE(busy.no_effect);
  CHECK_FALSE(busy.detect_ok); // the bucket ran dry and nobody noticed: a miss

  auto r = one_clean_request();
  r.faults = {idle};
  CHECK(r.passed());
  CHECK_THAT(r.text(), Catch::Contains("no effect observed (link carried 120.0 kbit/s, under the "
                                       "cut's 8mbit; its token bucket ran dry 0 times)"));
  // Brief bursts ran the bucket dry, but the link carried under half the cut on average.
  CHECK(judge(f, 5, 10, none, {}, link_usage{2'000'000, 40}).no_effect);
  r.faults = {busy};
  CHECK_FALSE(r.passed());
  CHECK_THAT(r.text(), Catch::Contains("MISSED"));
}

TEST_CASE("a blackhole that dropped packets between nodes it does not name fails the run") {
  auto f = blackhole("a", {"c"}, false);
  f.lasts = seconds{3};
  detection seen;
  seen.detected_s = 0.4;
  auto r = one_clean_request();
  r.faults = {judge(f, 1, 4, seen, rule_counts{50, 0})};
  CHECK(r.passed());
  r.faults = {judge(f, 1, 4, seen, rule_counts{50, 7})};
  CHECK_FALSE(r.faults[0].collateral_ok);
  CHECK_FALSE(r.passed());
  CHECK_THAT(r.text(), Catch::Contains("between nodes it does not name: 7  COLLATERAL"));
}

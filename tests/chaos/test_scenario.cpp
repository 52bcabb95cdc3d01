// Scenario files: a valid one reads back what it says; each kind of bad input is
// refused with an error naming the key.

#include <catch2/catch.hpp>

#include "prfaas/runtime/config.hpp"
#include "scenario.hpp"

using namespace prfaas::chaos;

namespace {

const std::string base = R"(
name: t
deployment: configs/two-dc/deployment.yaml
load: { rate: 2, duration: 20s, input_tokens: 512, output_tokens: 8, stream_fraction: 0.25, seed: 3, deadline: 10s }
)";

/// The error message parse_scenario gives for `text`, or "" when it accepts it.
std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "s.yaml");
    return "";
  } catch (const prfaas::config_error& e) {
    return e.what();
  }
}

} // namespace

TEST_CASE("a scenario reads back its load and faults") {
  auto s = parse_scenario(base + R"(
topology: loopback
fallback: loopback
faults:
  - { at: 5s, fault: kill, node: prfaas-0, restart_after: 3s, detect_within: 2s }
  - { at: 6s, fault: pause, node: pd-p0, for: 4s }
  - { at: 7s, fault: rate, rate: 8mbit, for: 1500ms }
  - { at: 8s, fault: blackhole, from: prfaas-0, to: [pd-gw, pd-d0], both_ways: true, for: 2s }
  - { at: 9s, fault: link_down, for: 1s, recover_within: 4s }
)",
                          "s.yaml");
  CHECK(s.topology == topology_kind::loopback);
  CHECK(s.fallback_loopback);
  CHECK(s.load.rate == 2);
  CHECK(s.load.duration.count() == Approx(20));
  REQUIRE(s.load.input.fixed);
  CHECK(*s.load.input.fixed == 512);
  CHECK(s.load.stream_fraction == 0.25);
  CHECK(s.load.deadline.count() == Approx(10));
  REQUIRE(s.faults.size() == 5);
  CHECK(s.faults[0].kind == fault_kind::kill);
  CHECK(s.faults[0].ends()->count() == Approx(8));
  CHECK(s.faults[0].detect_within->count() == Approx(2));
  CHECK(s.faults[1].ends()->count() == Approx(10));
  CHECK(s.faults[2].rate == "8mbit");
  CHECK(s.faults[2].ends()->count() == Approx(8.5));
  CHECK(s.faults[3].to == std::vector<std::string>{"pd-gw", "pd-d0"});
  CHECK(s.faults[3].both_ways);
  CHECK(s.faults[4].recover_within->count() == Approx(4));
}

TEST_CASE("a kill without restart never ends, and lognormal lengths are read") {
  auto s = parse_scenario(R"(
name: t
deployment: d.yaml
load: { input_tokens: { mu: 6, sigma: 0.5, min: 10, max: 100 } }
faults: [ { at: 1s, fault: kill, node: a } ]
)",
                          "s.yaml");
  CHECK_FALSE(s.faults[0].ends());
  CHECK_FALSE(s.load.input.fixed);
  CHECK(s.load.input.sigma == 0.5);
  CHECK(s.topology == topology_kind::netns);
  CHECK_FALSE(s.fallback_loopback);
}

TEST_CASE("bad scenarios name the key at fault") {
  auto faults = [](const std::string& f) { return base + "faults:\n  - " + f + "\n"; };
  struct bad {
    std::string text, expect;
  };
  std::vector<bad> cases{
      {base, "s.yaml: faults: missing"},
      {base + "faults: []\n", "faults: expected a non-empty list"},
      {base + "colour: red\nfaults: [{at: 1s, fault: kill, node: a}]\n", "colour: unknown key"},
      {base + "topology: cloud\nfaults: [{at: 1s, fault: kill, node: a}]\n",
       "topology: expected netns or loopback"},
      {base + "fallback: pray\nfaults: [{at: 1s, fault: kill, node: a}]\n",
       "fallback: expected loopback or skip"},
      {faults("{ at: soon, fault: kill, node: a }"), "faults[0].at: expected a duration"},
      {faults("{ fault: kill, node: a }"), "faults[0].at: missing"},
      {faults("{ at: 1s, fault: explode }"), "faults[0].fault: unknown fault \"explode\""},
      {faults("{ at: 1s, fault: kill }"), "faults[0].node: missing"},
      {faults("{ at: 1s, fault: kill, node: a, for: 2s }"), "faults[0].for: unknown key"},
      {faults("{ at: 1s, fault: pause, node: a }"), "faults[0].for: missing"},
      {faults("{ at: 1s, fault: rate, rate: fast, for: 1s }"), "faults[0].rate: expected a rate"},
      {faults("{ at: 1s, fault: blackhole, from: a, to: a, for: 1s }"),
       "faults[0].to: a node cannot be blackholed from itself"},
      {faults("{ at: 1s, fault: blackhole, from: a, to: [], for: 1s }"),
       "faults[0].to: expected a node name"},
      {faults("{ at: 1s, fault: blackhole, from: a, to: b, for: 1s, both_ways: maybe }"),
       "faults[0].both_ways: expected true or false"},
      {faults("{ at: 25s, fault: kill, node: a }"),
       "faults[0].at: the fault must start while the load runs"},
      {faults("{ at: 1s, fault: kill, node: a, detect_within: -1s }"), "faults[0].detect_within"},
      {base + "faults:\n  - { at: 1s, fault: kill, node: a, restart_after: 5s }\n  - { at: 3s, "
              "fault: pause, node: a, for: 1s }\n",
       "faults[1]: overlaps faults[0] on node a"},
      {base +
           "faults:\n  - { at: 1s, fault: kill, node: a }\n  - { at: 9s, fault: kill, node: a }\n",
       "faults[1]: overlaps faults[0] on node a"},
      {"name: t\ndeployment: d\nload: { rate: lots }\nfaults: [{at: 1s, fault: kill, node: a}]\n",
       "load.rate: expected a number"},
      {"name: t\ndeployment: d\nload: { stream_fraction: 2 }\nfaults: [{at: 1s, fault: kill, node: "
       "a}]\n",
       "load.stream_fraction: must be within [0, 1]"},
      {"name: t\ndeployment: d\nload: { input_tokens: { mu: 6, min: 100, max: 10 } }\nfaults: "
       "[{at: 1s, fault: kill, node: a}]\n",
       "load.input_tokens.max: must not be below min"},
      {"name: t\ndeployment: d\nload: { concurrency: 4 }\nfaults: [{at: 1s, fault: kill, node: "
       "a}]\n",
       "load.concurrency: unknown key"},
      {"name: t\nload: {}\nfaults: [{at: 1s, fault: kill, node: a}]\n", "deployment: missing"},
      {"name: [t\n", "not valid YAML"},
  };
  for (auto& c : cases) {
    INFO(c.text);
    auto e = error_of(c.text);
    CHECK_THAT(e, Catch::Contains(c.expect));
  }
}

TEST_CASE("faults on one node may follow each other") {
  auto s =
      parse_scenario(base + "faults:\n  - { at: 1s, fault: kill, node: a, restart_after: 2s }\n"
                            "  - { at: 3s, fault: pause, node: a, for: 1s }\n  - { at: 3s, fault: "
                            "pause, node: b, for: 1s }\n",
                     "s.yaml");
  CHECK(s.faults.size() == 3);
}

TEST_CASE("fault nodes must exist in the deployment") {
  auto s = parse_scenario(
      base + "faults: [{at: 1s, fault: blackhole, from: prfaas-0, to: [pd-gw, pd-x], for: 1s}]\n",
      "s.yaml");
  CHECK_NOTHROW(check_nodes(s, {"prfaas-0", "pd-gw", "pd-x"}));
  try {
    check_nodes(s, {"prfaas-0", "pd-gw"});
    FAIL("accepted an unknown node");
  } catch (const prfaas::config_error& e) {
    CHECK_THAT(std::string{e.what()}, Catch::Contains("faults[0].to: no node \"pd-x\""));
  }
}

TEST_CASE("link faults name a declared link, or the only one") {
  auto s = parse_scenario(base + R"(
faults:
  - { at: 1s, fault: rate, link: [prfaas, pd], rate: 8mbit, for: 2s }
  - { at: 4s, fault: link_down, for: 1s }
)",
                          "s.yaml");
  REQUIRE(s.faults.size() == 2);
  CHECK(s.faults[0].link == std::vector<std::string>{"prfaas", "pd"});
  CHECK(s.faults[0].describe() == "link prfaas-pd rate 8mbit for 2 s");
  CHECK(s.faults[1].link.empty());
  CHECK_THAT(
      error_of(base + "faults: [ { at: 1s, fault: rate, link: [pd], rate: 8mbit, for: 2s } ]"),
      Catch::Contains("faults[0].link") && Catch::Contains("two different cluster names"));

  auto d = prfaas::parse_deployment(R"(
deployment: t
model: { name: m, engine: profile }
clusters: { a: { kind: prefill-only }, b: { kind: prefill-only }, pd: { kind: pd } }
links: [ { between: [a, pd] }, { between: [b, pd] } ]
nodes: [ { name: n, cluster: pd, control: tcp://127.0.0.1:7000, data: tcp://127.0.0.1:7100 } ]
)",
                                    "<d>");
  auto named = parse_scenario(
      base + "faults: [ { at: 1s, fault: link_down, link: [pd, b], for: 1s } ]", "s.yaml");
  CHECK_NOTHROW(check_links(named, d));
  auto unknown = parse_scenario(
      base + "faults: [ { at: 1s, fault: link_down, link: [a, b], for: 1s } ]", "s.yaml");
  CHECK_THROWS_WITH(check_links(unknown, d), Catch::Contains("no link between a and b"));
  auto unnamed =
      parse_scenario(base + "faults: [ { at: 1s, fault: link_down, for: 1s } ]", "s.yaml");
  CHECK_THROWS_WITH(check_links(unnamed, d), Catch::Contains("declares 2 links; name the one"));
}

TEST_CASE("a fault point fault names the node, the point and a probability") {
  auto s = parse_scenario(base + R"(
faults:
  - { at: 2s, fault: fault_point, node: pd-gw, point: transport.drop, probability: 0.15, for: 5s }
)",
                          "s.yaml");
  REQUIRE(s.faults.size() == 1);
  auto& f = s.faults[0];
  CHECK(f.kind == fault_kind::fault_point);
  CHECK(f.node == "pd-gw");
  CHECK(f.point == "transport.drop");
  CHECK(f.probability == Approx(0.15));
  REQUIRE(f.ends());
  CHECK(f.ends()->count() == Approx(7.0));
  CHECK(f.describe() == "fault point transport.drop at 0.15 on pd-gw for 5 s");
  CHECK_NOTHROW(check_points(s)); // a point of the runtime's own inventory

  auto fault = [](const std::string& extra) {
    return base + "faults:\n  - { at: 2s, fault: fault_point, node: pd-gw, point: " + extra +
           " }\n";
  };
  CHECK_THAT(error_of(fault("transport.drop, probability: 0, for: 1s")),
             Catch::Contains("faults[0].probability") && Catch::Contains("above 0"));
  CHECK_THAT(error_of(fault("transport.drop, probability: 1.5, for: 1s")),
             Catch::Contains("faults[0].probability"));
  CHECK_THAT(error_of(fault("transport.drop, for: 1s")), Catch::Contains("faults[0].probability"));
  CHECK_THAT(error_of(fault("transport.drop, probability: 0.1")), Catch::Contains("faults[0].for"));
  auto unknown = parse_scenario(fault("no.such_point, probability: 0.1, for: 1s"), "s.yaml");
  CHECK_THROWS_WITH(check_points(unknown),
                    Catch::Contains("faults[0].point") &&
                        Catch::Contains("no fault point \"no.such_point\"") &&
                        Catch::Contains("transport.drop"));
}

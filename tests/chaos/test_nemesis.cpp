// The randomized nemesis draws valid, reproducible schedules: the same seed gives the
// same faults, the file it writes reads back to them, no fault touches a node or link
// another one holds, the gateway is never killed or paused (its messages may be lost),
// and the tail is quiet.

#include <catch2/catch.hpp>

#include "nemesis.hpp"

using namespace prfaas::chaos;

namespace {

prfaas::deployment_config six_nodes() {
  return prfaas::load_deployment("configs/six-node/deployment.yaml");
}

std::vector<std::string> touched(const fault_spec& f) {
  if (!f.link.empty())
    return {"link " + f.link[0] + "-" + f.link[1]};
  std::vector<std::string> out = f.to;
  for (auto* n : {&f.node, &f.from})
    if (!n->empty())
      out.push_back(*n);
  return out;
}

} // namespace

TEST_CASE("the nemesis: the same seed gives the same scenario, another seed another") {
  auto d = six_nodes();
  nemesis_options o;
  o.seed = 7;
  auto a = to_yaml(random_scenario(d, "configs/six-node/deployment.yaml", o));
  auto b = to_yaml(random_scenario(d, "configs/six-node/deployment.yaml", o));
  CHECK(a == b);
  o.seed = 8;
  CHECK(a != to_yaml(random_scenario(d, "configs/six-node/deployment.yaml", o)));
}

TEST_CASE("the nemesis: schedules are valid, disjoint per target, and leave a quiet tail long "
          "enough to judge the heal") {
  auto d = six_nodes();
  std::set<fault_kind> kinds;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    nemesis_options o;
    o.seed = seed;
    auto s = random_scenario(d, "configs/six-node/deployment.yaml", o);
    INFO("seed " << seed << "\n" << to_yaml(s));
    REQUIRE(s.faults.size() == 8);
    // What it writes is a scenario file that reads back to the same faults.
    auto back = parse_scenario(to_yaml(s), "<drawn>");
    REQUIRE(back.faults.size() == s.faults.size());
    for (size_t i = 0; i < s.faults.size(); ++i)
      CHECK(back.faults[i].describe() == s.faults[i].describe());
    std::vector<std::string> nodes;
    for (auto& n : d.nodes)
      nodes.push_back(n.name);
    CHECK_NOTHROW(check_nodes(back, nodes));
    CHECK_NOTHROW(check_links(back, d));
    CHECK_NOTHROW(check_points(back));
    for (size_t i = 0; i < s.faults.size(); ++i) {
      auto& f = s.faults[i];
      kinds.insert(f.kind);
      CHECK(f.at.count() >= 2);
      REQUIRE(f.ends());
      CHECK(f.ends()->count() <= o.duration.count() - 10 + 1e-9);
      // Requests go on long enough after the heal to be judged.
      CHECK(s.load.duration.count() >= f.ends()->count() + heal_margin_s - 1e-9);
      if (f.kind == fault_kind::kill || f.kind == fault_kind::pause)
        CHECK(f.node != "pd-gw"); // the gateway has no failover for its clients
      for (size_t j = 0; j < i; ++j) {
        auto& g = s.faults[j];
        bool overlap = f.at < *g.ends() && g.at < *f.ends();
        if (!overlap)
          continue;
        for (auto& t : touched(f))
          for (auto& u : touched(g))
            CHECK(t != u);
      }
    }
  }
  CHECK(kinds.size() == 6); // every kind is drawn over the seeds
}

TEST_CASE("the nemesis refuses a load too short for a window") {
  nemesis_options o;
  o.duration = seconds{12};
  CHECK_THROWS_AS(random_scenario(six_nodes(), "d.yaml", o), std::invalid_argument);
}

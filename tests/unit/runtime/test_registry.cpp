// The actor registry: parameters checked against the type's declaration, defaults,
// and errors naming the key path.

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "prfaas/runtime/actor_docs.hpp"
#include "prfaas/runtime/actor_registry.hpp"

using Catch::Matchers::Contains;

namespace {

prfaas::actor_registry registry() {
  prfaas::actor_registry r;
  r.add({"worker",
         "test type",
         {{"batch", prfaas::param_kind::integer, "8", "max batch"},
          {"period", prfaas::param_kind::duration, "200ms", "tick"},
          {"rate", prfaas::param_kind::rate, "", "pacing"},
          {"model", prfaas::param_kind::string, "", "model name", true}},
         [](prfaas::node_context&, const std::string&, const prfaas::actor_params&) {
           return caf::actor{};
         }});
  return r;
}

prfaas::deployment_config dep(const std::string& actor) {
  return prfaas::parse_deployment(
      "deployment: d\nnodes:\n  - name: n\n    control: tcp://127.0.0.1:7100\n"
      "    data: tcp://127.0.0.1:7200\n    actors:\n      - " +
          actor + "\n",
      "<test>");
}

} // namespace

TEST_CASE("parameters get defaults and typed accessors") {
  auto r = registry();
  auto d = dep("{ type: worker, name: w, model: m1, rate: 1gbit }");
  r.validate(d);
  auto p = r.params_for(d.nodes[0].actors[0]);
  CHECK(p.integer("batch") == 8);
  CHECK(p.dur("period") == std::chrono::milliseconds(200));
  CHECK(p.rate("rate") == 1000000000ull);
  CHECK(p.str("model") == "m1");
  CHECK_THROWS_AS(p.str("undeclared"), prfaas::config_error);
}

TEST_CASE("bad actor entries name the key path") {
  auto r = registry();
  struct row {
    const char* actor;
    const char* path;
    const char* reason;
  };
  std::vector<row> rows{
      {"{ type: nope, name: w }", "nodes[0].actors[0].type",
       "unknown actor type \"nope\" (known: worker)"},
      {"{ type: worker, name: w }", "nodes[0].actors[0].model", "required parameter"},
      {"{ type: worker, name: w, model: m, batch: many }", "nodes[0].actors[0].batch",
       "expected an integer, got \"many\""},
      {"{ type: worker, name: w, model: m, period: soon }", "nodes[0].actors[0].period",
       "expected a duration"},
      {"{ type: worker, name: w, model: m, colour: red }", "nodes[0].actors[0].colour",
       "unknown parameter for actor type worker (expected one of: batch, period, rate, model)"},
      {"{ type: worker, name: w, model: [a, b] }", "nodes[0].actors[0].model",
       "expected a string, got a sequence"},
  };
  for (auto& row : rows) {
    INFO(row.actor);
    try {
      r.validate(dep(row.actor));
      FAIL("accepted");
    } catch (const prfaas::config_error& e) {
      CHECK(e.path() == row.path);
      CHECK_THAT(e.what(), Contains(row.reason));
    }
  }
}

TEST_CASE("registering a type twice is refused") {
  auto r = registry();
  CHECK_THROWS_WITH(r.add({"worker", "", {}, [](auto&, auto&, auto&) { return caf::actor{}; }}),
                    Contains("registered twice"));
}

TEST_CASE("in-tree example types are registered without runtime changes") {
  auto r = prfaas::actor_registry::with_builtins();
  for (auto name : {"echo", "counter", "crashy"}) {
    INFO(name);
    CHECK(r.find(name) != nullptr);
  }
}

TEST_CASE("the shipped deployments validate against the in-tree registry") {
  auto r = prfaas::actor_registry::with_builtins();
  for (auto file : {"configs/sample.yaml", "configs/local.yaml"}) {
    INFO(file);
    CHECK_NOTHROW(r.validate(prfaas::load_deployment(file)));
  }
}

TEST_CASE("actor types are written out from their registrations") {
  auto text = prfaas::describe_actor_types(registry(), "#", 40);
  // The type with its doc, then each parameter with its default (or "required") and doc,
  // wrapped at 40 columns with continuation lines indented under the entry.
  CHECK(text == "#   worker: test type\n"
                "#     batch: 8 — max batch\n"
                "#     period: 200ms — tick\n"
                "#     rate: (none) — pacing\n"
                "#     model: (required) — model name\n");
  prfaas::actor_registry wide;
  wide.add({"w",
            "a type whose documentation is long enough to need two lines",
            {},
            [](prfaas::node_context&, const std::string&, const prfaas::actor_params&) {
              return caf::actor{};
            }});
  CHECK(prfaas::describe_actor_types(wide, "#", 40) == "#   w: a type whose documentation is\n"
                                                       "#     long enough to need two lines\n");
}

TEST_CASE("the generated actor-types block is found and replaced between its markers") {
  const std::string begin = std::string{"  # "} + prfaas::actor_types_begin + "\n";
  const std::string end = std::string{"  # "} + prfaas::actor_types_end + "\n";
  const std::string text = "head\n" + begin + "old 1\nold 2\n" + end + "tail\n";
  CHECK(prfaas::extract_actor_types(text) == "old 1\nold 2\n");
  CHECK(prfaas::replace_actor_types(text, "new\n") == "head\n" + begin + "new\n" + end + "tail\n");
  CHECK_THROWS_WITH(prfaas::extract_actor_types("head\n" + end + begin),
                    Contains("no generated actor-types block"));
  CHECK_THROWS_WITH(prfaas::extract_actor_types("head\n" + begin),
                    Contains("no generated actor-types block"));
}

TEST_CASE("configs/sample.yaml documents the built-in actor types as they are registered") {
  std::ifstream in{"configs/sample.yaml"};
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  INFO("out of date: regenerate it with `prfaas-node actor-types --update configs/sample.yaml`");
  CHECK(prfaas::extract_actor_types(text.str()) ==
        prfaas::describe_actor_types(prfaas::actor_registry::with_builtins()));
}

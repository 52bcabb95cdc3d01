// settings_schema: one declaration per setting gives the parameter specs (defaults
// rendered from the struct's own initialisers) and the typed settings.

#include <catch2/catch.hpp>

#include "prfaas/runtime/settings_schema.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

struct limits {
  uint32_t threads = 8;
  int workers = 3;
};

struct example_settings {
  uint32_t max_batch = 16;
  prfaas::duration ttl = 30s;
  uint64_t max_bytes = uint64_t{1} << 30;
  uint64_t pace = 25'000'000;
  double ratio = 1.5;
  bool enabled = true;
  std::string name;
  std::string peer;
  limits nested;
};

const prfaas::settings_schema<example_settings>& schema() {
  using prfaas::param_kind;
  static const auto s =
      prfaas::settings_schema<example_settings>{}
          .param("max_batch", param_kind::integer, &example_settings::max_batch, "batch")
          .param("ttl", param_kind::duration, &example_settings::ttl, "time to live")
          .param("max_bytes", param_kind::bytes, &example_settings::max_bytes, "bytes")
          .param("pace", param_kind::rate, &example_settings::pace, "pace")
          .param("ratio", param_kind::number, &example_settings::ratio, "ratio")
          .param("enabled", param_kind::boolean, &example_settings::enabled, "on")
          .param("name", param_kind::string, &example_settings::name, "a name")
          .required("peer", param_kind::string, &example_settings::peer, "the peer")
          .param("threads", param_kind::integer, &example_settings::nested, &limits::threads,
                 "threads")
          .param(
              "workers", param_kind::integer,
              [](example_settings & s) -> auto& { return s.nested.workers; }, "workers")
          .spec({"extra", param_kind::any, "", "read by the component itself"});
  return s;
}

prfaas::actor_params params_of(const std::string& yaml) {
  prfaas::actor_registry r;
  r.add({"example", "", schema().specs(),
         [](prfaas::node_context&, const std::string&, const prfaas::actor_params&) {
           return caf::actor{};
         }});
  prfaas::actor_config a{"example", "x", "permanent", YAML::Load(yaml), "nodes[0].actors[0]"};
  return r.params_for(a);
}

} // namespace

TEST_CASE("a settings schema renders each default from the struct's initialiser") {
  auto specs = schema().specs();
  REQUIRE(specs.size() == 11);
  std::vector<std::string> defaults;
  for (auto& s : specs)
    defaults.push_back(s.default_value);
  CHECK(defaults == std::vector<std::string>{"16", "30s", "1GiB", "25mbit", "1.5", "true", "\"\"",
                                             "", "8", "3", ""});
  CHECK(specs[7].required);
  CHECK_FALSE(specs[0].required);
  CHECK(specs[1].doc == "time to live");
  CHECK(specs[10].kind == prfaas::param_kind::any);
}

TEST_CASE("a settings schema reads the typed settings, defaults where the file is silent") {
  auto s = schema().read(params_of("{peer: n1/a, ttl: 2s, max_bytes: 64MiB, pace: 1gbit, "
                                   "threads: 3, workers: 5, enabled: false, ratio: 0.25}"));
  CHECK(s.peer == "n1/a");
  CHECK(s.ttl == 2s);
  CHECK(s.max_bytes == uint64_t{64} << 20);
  CHECK(s.pace == 1'000'000'000);
  CHECK(s.nested.threads == 3);
  CHECK(s.nested.workers == 5);
  CHECK_FALSE(s.enabled);
  CHECK(s.ratio == 0.25);
  CHECK(s.max_batch == 16); // not given: the struct's default, through its rendered spec
  CHECK(s.name.empty());

  auto defaults = schema().read(params_of("{peer: p}"));
  example_settings plain;
  CHECK(defaults.max_batch == plain.max_batch);
  CHECK(defaults.ttl == plain.ttl);
  CHECK(defaults.max_bytes == plain.max_bytes);
  CHECK(defaults.pace == plain.pace);
  CHECK(defaults.ratio == plain.ratio);
  CHECK(defaults.enabled == plain.enabled);
  CHECK(defaults.nested.threads == plain.nested.threads);
  CHECK(defaults.nested.workers == plain.nested.workers);
}

TEST_CASE("a settings schema's parameters are checked like any other") {
  CHECK_THROWS_WITH(params_of("{ttl: 2s}"), Contains("nodes[0].actors[0].peer"));
  CHECK_THROWS_WITH(params_of("{peer: p, ttl: soon}"), Contains("nodes[0].actors[0].ttl"));
}

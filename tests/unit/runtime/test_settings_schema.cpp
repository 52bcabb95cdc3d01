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

namespace {

struct bounded_settings {
  uint32_t batch = 4;
  int64_t spare = 0;
  uint32_t layers = 1;
  double share = 0.5;
};

prfaas::actor_params bounded_params(const std::string& yaml) {
  using prfaas::param_kind;
  using B = bounded_settings;
  static const auto s = prfaas::settings_schema<B>{}
                            .param("batch", param_kind::integer, &B::batch, "batch")
                            .at_least(1)
                            .param("spare", param_kind::integer, &B::spare, "spare")
                            .at_least(0)
                            .param("layers", param_kind::integer, &B::layers, "layers")
                            .between(1, 4096)
                            .param("share", param_kind::number, &B::share, "share")
                            .between(0, 1);
  prfaas::actor_registry r;
  r.add({"bounded", "", s.specs(),
         [](prfaas::node_context&, const std::string&, const prfaas::actor_params&) {
           return caf::actor{};
         }});
  prfaas::actor_config a{"bounded", "b", "permanent", YAML::Load(yaml), "nodes[1].actors[2]"};
  return r.params_for(a);
}

} // namespace

TEST_CASE("a parameter's bounds are declared with it and refused naming the key") {
  CHECK_NOTHROW(bounded_params("{batch: 1, spare: 0, layers: 4096, share: 1}"));
  CHECK_THROWS_WITH(bounded_params("{batch: 0}"),
                    Contains("nodes[1].actors[2].batch") && Contains("must be at least 1"));
  CHECK_THROWS_WITH(bounded_params("{spare: -1}"),
                    Contains("nodes[1].actors[2].spare") && Contains("must not be negative"));
  CHECK_THROWS_WITH(bounded_params("{layers: 4097}"), Contains("nodes[1].actors[2].layers") &&
                                                          Contains("must be between 1 and 4096"));
  CHECK_THROWS_WITH(bounded_params("{share: 1.5}"),
                    Contains("nodes[1].actors[2].share") && Contains("must be between 0 and 1"));
  // The kind is checked first: a word is not a number out of bounds.
  CHECK_THROWS_WITH(bounded_params("{batch: many}"), Contains("expected an integer"));
}

// Bad planner configs are rejected with an error that names the key.

#include "planner_fixture.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <functional>

using namespace prfaas::planner;

namespace {

const std::string profiles = std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles";

/// The case-study config with absolute profile paths, mutated by `edit`, parsed.
planner_config parse_edited(const std::function<void(YAML::Node&)>& edit,
                            const std::string& base_dir = profiles) {
  YAML::Node root = YAML::LoadFile(prfaas::planner::test::case_study_path());
  root["clusters"]["prfaas"]["profile"] = profiles + "/kimi-linear-1t-h200.yaml";
  root["clusters"]["pd"]["profile"] = profiles + "/kimi-linear-1t-h20.yaml";
  edit(root);
  YAML::Emitter e;
  e << root;
  return parse_config(e.c_str(), "edited.yaml", base_dir);
}

std::string error_of(const std::function<void(YAML::Node&)>& edit) {
  try {
    parse_edited(edit);
  } catch (const config_error& e) {
    return e.what();
  }
  return "(accepted)";
}

} // namespace

TEST_CASE("the case-study config parses and the unedited copy matches it", "[planner][config]") {
  const auto cfg = parse_edited([](YAML::Node&) {});
  CHECK(cfg.inputs.prfaas.instances == 4);
  CHECK(cfg.inputs.pd.instances == 8);
  CHECK(cfg.inputs.homogeneous_instances == 12);
  CHECK(cfg.inputs.link_gbps == 100);
  CHECK(cfg.inputs.output_tokens == 1024);
  CHECK(cfg.inputs.slo_tokens_per_s == 40);
  CHECK(cfg.inputs.form == prefill_time_form::mean_length);
  CHECK(cfg.reference.at("prfaas_pd").at("lambda_max") == 3.24);
}

TEST_CASE("bad configs are rejected naming the key", "[planner][config]") {
  struct bad_case {
    const char* what;
    std::function<void(YAML::Node&)> edit;
    const char* key;
  };
  const std::vector<bad_case> cases = {
      {"missing PD size", [](YAML::Node& r) { r["clusters"]["pd"].remove("instances"); },
       "'clusters.pd.instances' is missing"},
      {"zero PrfaaS instances", [](YAML::Node& r) { r["clusters"]["prfaas"]["instances"] = 0; },
       "'clusters.prfaas.instances'"},
      {"instances not a number",
       [](YAML::Node& r) { r["clusters"]["prfaas"]["instances"] = "four"; },
       "'clusters.prfaas.instances' has the wrong type"},
      {"negative bandwidth", [](YAML::Node& r) { r["link"]["bandwidth_gbps"] = -1; },
       "'link.bandwidth_gbps' must be > 0"},
      {"zero sigma", [](YAML::Node& r) { r["workload"]["input_lengths"]["sigma"] = 0; },
       "'workload.input_lengths.sigma'"},
      {"inverted range", [](YAML::Node& r) { r["workload"]["input_lengths"]["max_tokens"] = 64; },
       "'workload.input_lengths.max_tokens'"},
      {"typo'd key", [](YAML::Node& r) { r["workload"]["input_lengths"]["sgima"] = 1; },
       "'workload.input_lengths.sgima' is not a known key"},
      {"unknown law", [](YAML::Node& r) { r["workload"]["input_lengths"]["kind"] = "weibull"; },
       "'workload.input_lengths.kind'"},
      {"missing profile file",
       [](YAML::Node& r) { r["clusters"]["pd"]["profile"] = "no-such-profile.yaml"; },
       "'clusters.pd.profile' cannot be loaded"},
      {"phi-only profile",
       [](YAML::Node& r) { r["clusters"]["prfaas"]["profile"] = "kimi-linear-48b-h200.yaml"; },
       "'clusters.prfaas.profile' is phi-only"},
      {"bad prefill-time form", [](YAML::Node& r) { r["model"]["prefill_time"] = "median"; },
       "'model.prefill_time'"},
      {"no output length", [](YAML::Node& r) { r["workload"].remove("output_tokens"); },
       "'workload.output_tokens' is missing"},
      {"SLO of zero", [](YAML::Node& r) { r["workload"]["decode_slo_tokens_per_s"] = 0; },
       "'workload.decode_slo_tokens_per_s'"},
      {"one homogeneous instance",
       [](YAML::Node& r) { r["baselines"]["homogeneous_instances"] = 1; },
       "'baselines.homogeneous_instances'"},
      {"unknown top-level key", [](YAML::Node& r) { r["linkk"] = 1; }, "'linkk'"},
      {"clusters not a mapping", [](YAML::Node& r) { r["clusters"] = 3; },
       "'clusters' must be a mapping"},
      {"unknown reference plan", [](YAML::Node& r) { r["reference"]["best"]["lambda_max"] = 1; },
       "'reference.best'"},
      {"reference figure not a number",
       [](YAML::Node& r) { r["reference"]["prfaas_pd"]["lambda_max"] = "high"; },
       "'reference.prfaas_pd.lambda_max'"},
      {"missing trace",
       [](YAML::Node& r) {
         YAML::Node l;
         l["kind"] = "trace";
         l["path"] = "/nonexistent/trace.jsonl";
         r["workload"]["input_lengths"] = l;
       },
       "'workload.input_lengths.path' cannot be used"},
      {"zero length in a list",
       [](YAML::Node& r) {
         YAML::Node l;
         l["kind"] = "list";
         l["tokens"].push_back(100);
         l["tokens"].push_back(0);
         r["workload"]["input_lengths"] = l;
       },
       "'workload.input_lengths.tokens[1]'"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const auto msg = error_of(c.edit);
    CHECK_THAT(msg, Catch::Contains(c.key));
    CHECK_THAT(msg, Catch::StartsWith("edited.yaml: "));
  }
}

TEST_CASE("a PD profile without a decode model is rejected naming the key", "[planner][config]") {
  prfaas::test::temp_dir dir("prfaas-planner");
  YAML::Node prof = YAML::LoadFile(profiles + "/kimi-linear-1t-h20.yaml");
  prof.remove("decode");
  YAML::Emitter e;
  e << prof;
  const auto path = dir.file("no-decode.yaml", e.c_str());
  const auto msg = error_of([&](YAML::Node& r) { r["clusters"]["pd"]["profile"] = path.string(); });
  CHECK_THAT(msg, Catch::Contains("'clusters.pd.profile' has no 'decode' model"));
}

TEST_CASE("unreadable files and YAML errors name the file", "[planner][config]") {
  CHECK_THROWS_WITH(load_config("/nonexistent/plan.yaml"),
                    Catch::Contains("/nonexistent/plan.yaml"));
  CHECK_THROWS_WITH(parse_config("a: [", "broken.yaml", "."), Catch::Contains("broken.yaml"));
  CHECK_THROWS_WITH(parse_config("- 1", "list.yaml", "."), Catch::Contains("top level"));
}

TEST_CASE("length laws from a list and from a trace file", "[planner][config]") {
  prfaas::test::temp_dir dir("prfaas-planner");
  const auto trace =
      dir.file("t.jsonl", R"({"input_length": 2048, "hash_ids": [1, 2, 3, 4]})"
                          "\n"
                          R"({"input_length": 4096, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]})"
                          "\n");
  const auto cfg = parse_edited(
      [&](YAML::Node& r) {
        YAML::Node l;
        l["kind"] = "trace";
        l["path"] = "t.jsonl"; // relative to the base dir
        r["workload"]["input_lengths"] = l;
      },
      dir.path().string());
  CHECK(cfg.inputs.lengths.mean() == Approx((2048 + 2048) / 2.0));
  const auto listed = parse_edited([](YAML::Node& r) {
    YAML::Node l;
    l["kind"] = "list";
    for (int v : {1000, 30000, 60000})
      l["tokens"].push_back(v);
    r["workload"]["input_lengths"] = l;
  });
  CHECK(listed.inputs.lengths.size() == 3);
  CHECK(listed.inputs.lengths.mean() == Approx(91000 / 3.0));
}

// The cache-replay config: the shipped one loads; a bad key is an error naming it.

#include <filesystem>

#include <catch2/catch.hpp>

#include "cache_replay_command.hpp"
#include "prfaas/runtime/config.hpp"
#include "support/process.hpp"

using namespace prfaas;
using namespace prfaas::sim;

namespace {

const std::string profile = PRFAAS_SOURCE_DIR "/configs/profiles/kimi-linear-1t-h20.yaml";

std::string config(const std::string& cluster_extra, const std::string& run) {
  return "trace: t.jsonl\n"
         "deployments:\n"
         "  d:\n"
         "    clusters:\n"
         "      - { name: pd, kind: pd, prefill_workers: 2, profile: " +
         profile + cluster_extra +
         " }\n"
         "runs:\n"
         "  - " +
         run + "\n";
}

/// The key path of the config_error loading `text` raises ("" if none).
std::string error_path(const std::string& text) {
  prfaas::test::temp_dir dir{"prfaas-replay-cfg"};
  try {
    load_replay_config(dir.file("replay.yaml", text).string());
  } catch (const config_error& e) {
    return e.path();
  }
  return "";
}

} // namespace

TEST_CASE("replay config: the shipped trace-replay.yaml loads") {
  auto cfg = load_replay_config(PRFAAS_SOURCE_DIR "/configs/trace-replay.yaml");
  CHECK(cfg.options.block_tokens == 512);
  REQUIRE(cfg.deployments.count("prfaas-pd") == 1);
  auto& d = cfg.deployments.at("prfaas-pd");
  REQUIRE(d.clusters.size() == 2);
  CHECK(d.clusters[0].prfaas);
  CHECK(d.clusters[0].prefill_workers == 4);
  CHECK(d.clusters[1].prefill_workers == 3);
  CHECK(d.decode_workers == 5);
  CHECK(cfg.runs.front().policy == "prfaas");
  CHECK_THAT(cfg.trace, Catch::EndsWith("/data/traces/mooncake_synthetic_trace.jsonl"));
  CHECK(std::filesystem::is_regular_file(cfg.trace)); // the trace shipped in the repository
}

TEST_CASE("replay config: a minimal config takes the defaults") {
  prfaas::test::temp_dir dir{"prfaas-replay-cfg"};
  auto file = dir.file("r.yaml", config("", "{ policy: homogeneous_pd, deployment: d }"));
  auto cfg = load_replay_config(file.string());
  CHECK(cfg.trace == (dir.path() / "t.jsonl").string());
  CHECK(cfg.deployments.at("d").clusters[0].cache_blocks == 1024);
  CHECK_FALSE(cfg.deployments.at("d").clusters[0].prfaas);
}

TEST_CASE("replay config: errors name the key") {
  const std::string ok_run = "{ policy: prfaas, deployment: d }";
  CHECK(error_path(config(", cach_blocks: 3", ok_run)) == "deployments.d.clusters[0].cach_blocks");
  auto gpu = config("", ok_run);
  gpu.replace(gpu.find("kind: pd"), 8, "kind: gpu");
  CHECK(error_path(gpu) == "deployments.d.clusters[0].kind");
  CHECK(error_path(config(", cache_blocks: -1", ok_run)) ==
        "deployments.d.clusters[0].cache_blocks");
  CHECK(error_path(config("", "{ policy: nope, deployment: d }")) == "runs[0].policy");
  CHECK(error_path(config("", "{ policy: prfaas, deployment: e }")) == "runs[0].deployment");
  CHECK(error_path(config("", "{ policy: prfaas, deployment: d, params: { threshold: abc } }")) ==
        "runs[0].params");
  CHECK(error_path(config("", "{ policy: threshold, deployment: d }")) ==
        "runs[0].params.threshold");
  CHECK(error_path("trace: t\nruns: []\n") == "deployments");
  CHECK(error_path(config("", ok_run) + "speed: 2\n") == "speed");
}

// `prfaas-bench directory` as a child process on a trace small enough to count by hand:
// what it calls ops and block ops (the unit its targets are in), that the latency index
// holds at least the entries asked for, and that bad options stop it.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/json_line.hpp"
#include "support/process.hpp"

using namespace prfaas::test;

TEST_CASE("directory bench: ops and block ops are counted as Dynamo's mooncake_bench counts them") {
  temp_dir dir;
  // One worker with room for all: r1 stores 3 blocks; r2 shares the first two and
  // stores 2; r3 repeats r1 and stores nothing. Nothing is evicted.
  auto trace = dir.file(
      "t.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n"
      "{\"timestamp\": 1, \"input_length\": 2048, \"output_length\": 1, \"hash_ids\": [1, 2, 4, "
      "5]}\n"
      "{\"timestamp\": 2, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, "
      "3]}\n");
  command cmd;
  cmd.argv = {PRFAAS_BENCH_BIN, "directory", "--trace",           trace.string(),
              "--workers",      "1",         "--duplicate",       "1",
              "--repeat",       "1",         "--latency-blocks",  "1000",
              "--chain-blocks", "16",        "--latency-queries", "200",
              "--json"};
  cmd.out_file = dir.path() / "out.txt";
  auto r = run(cmd, std::chrono::seconds(120));
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto j = last_json_line(read_file(cmd.out_file));
  CHECK(j["requests"] == 3);
  CHECK(j["events"] == 2);                    // two stored events, no evictions
  CHECK(j["block_ops"] == 3 + 3 + 4 + 2 + 3); // query blocks + stored blocks
  CHECK(j["index_ops_per_s"].get<double>() > 0);
  CHECK(j["actor_ops_per_s"].get<double>() > 0);
  // Block ops per op is the same ratio whichever path ran them.
  const double ratio = 15.0 / 5.0;
  CHECK(j["index_block_ops_per_s"].get<double>() ==
        Approx(j["index_ops_per_s"].get<double>() * ratio));
  CHECK(j["latency_entries"].get<uint64_t>() >= 1000);
  CHECK(j["match_mean_blocks"].get<double>() == Approx(16.0));
  CHECK(j["bytes_per_block"].get<double>() > 0);
  CHECK(read_file(cmd.out_file).find("targets, in block ops:") != std::string::npos);
}

TEST_CASE("directory bench: a missing trace or a bad option stops it with a message") {
  temp_dir dir;
  command missing;
  missing.argv = {PRFAAS_BENCH_BIN, "directory", "--trace", "/nonexistent/trace.jsonl"};
  missing.out_file = dir.path() / "missing.txt";
  auto r = run(missing, std::chrono::seconds(30));
  CHECK(r.code.value_or(0) != 0);
  CHECK(
      read_file(missing.out_file).find("--trace: File does not exist: /nonexistent/trace.jsonl") !=
      std::string::npos);

  command chain;
  chain.argv = {PRFAAS_BENCH_BIN, "directory", "--chain-blocks", "1"};
  chain.out_file = dir.path() / "chain.txt";
  r = run(chain, std::chrono::seconds(30));
  CHECK(r.code.value_or(0) != 0);
  CHECK(read_file(chain.out_file).find("--chain-blocks: Value 1 not in range") !=
        std::string::npos);
}

// `prfaas-bench transfer` as a child process on a small transfer: real processes, real
// sockets, both plain-TCP baselines. Its figures are timings, so only their presence
// and their arithmetic are checked here, never their size; the benchmark itself is
// what reports speed.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/json_line.hpp"
#include "support/process.hpp"

using namespace prfaas::test;

TEST_CASE("transfer bench: the data plane and both plain-TCP baselines run, each to the end") {
  temp_dir dir;
  command cmd;
  // 16 chunks of 1 MiB over 2 connections, pools of 4 buffers: the TCP baseline
  // cycles through 4 buffers on each side.
  cmd.argv = {PRFAAS_BENCH_BIN, "transfer", "--bytes",        "16777216", "--chunk",  "1048576",
              "--connections",  "2",        "--pool-buffers", "4",        "--repeat", "2",
              "--no-rtt",       "--json"};
  cmd.out_file = dir.path() / "out.txt";
  auto r = run(cmd, std::chrono::seconds(180));
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto out = read_file(cmd.out_file);
  INFO(out);
  auto j = last_json_line(out);
  CHECK(j["bytes"].get<double>() == 16777216.0);
  CHECK(j["retransmits"] == 0);
  const double dp = j["gb_per_s"].get<double>();
  const double tcp = j["tcp_gb_per_s"].get<double>();
  CHECK(dp > 0);
  CHECK(tcp > 0);
  CHECK(j["tcp_one_buffer_gb_per_s"].get<double>() > 0);
  CHECK(j["ratio_tcp"].get<double>() == Approx(dp / tcp).epsilon(1e-3));
  // The text names which baseline the target uses, and prints the other beside it.
  CHECK(out.find("chunk-sized writes from 4\n") != std::string::npos);
  CHECK(out.find("reads into 4 (the pools')") != std::string::npos);
  CHECK(out.find("TCP, 1 buf") != std::string::npos);
  CHECK(out.find("of plain TCP; ") != std::string::npos);
}

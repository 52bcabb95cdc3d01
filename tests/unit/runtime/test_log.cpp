// --log-format json: each event line becomes one JSON object with the same fields.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "prfaas/runtime/log.hpp"

using json = nlohmann::json;

TEST_CASE("json log lines carry time, level, node, inc, the event and every key=value") {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger log{"node=pd-gw inc=42", sink};
  log.set_formatter(prfaas::make_json_formatter());
  log.warn("prefill_failover request=r-1 failed_node=pd-p0 attempt=2 reason=\"peer down: "
           "\\\"pd-p0\\\" silent\"");
  log.info("node_started");
  log.info("odd line with prose key=v");
  log.info("data_bulk_listening node=pd-gw port=7 inc=43 event=x");
  std::istringstream lines{out.str()};
  std::string line;
  REQUIRE(std::getline(lines, line));
  auto j = json::parse(line);
  CHECK(j["level"] == "warning");
  CHECK(j["node"] == "pd-gw");
  CHECK(j["inc"] == "42");
  CHECK(j["event"] == "prefill_failover");
  CHECK(j["request"] == "r-1");
  CHECK(j["failed_node"] == "pd-p0");
  CHECK(j["attempt"] == "2");
  CHECK(j["reason"] == "peer down: \"pd-p0\" silent"); // quoted value, escapes undone
  CHECK(j["time"].get<std::string>().size() == 27);    // 2026-12-04T08:00:00.000000Z
  REQUIRE(std::getline(lines, line));
  j = json::parse(line);
  CHECK(j["event"] == "node_started");
  CHECK(j.size() == 5); // time, level, node, inc, event
  REQUIRE(std::getline(lines, line));
  j = json::parse(line);
  CHECK(j["event"] == "odd");
  CHECK(j["text"] == "line with prose"); // nothing is dropped
  CHECK(j["key"] == "v");
  // Keys the envelope has: the same value is dropped, another kept as arg_KEY.
  REQUIRE(std::getline(lines, line));
  j = json::parse(line);
  CHECK(j["node"] == "pd-gw");
  CHECK(j["inc"] == "42");
  CHECK(j["arg_inc"] == "43");
  CHECK(j["arg_event"] == "x");
  CHECK(j["port"] == "7");
  CHECK(j.size() == 8);
  CHECK(line.find("\"node\"") == line.rfind("\"node\"")); // written once
}

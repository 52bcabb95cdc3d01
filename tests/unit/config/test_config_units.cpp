// The config units on their own: durations, byte sizes, rates and log levels as the
// deployment file spells them (runtime/include/prfaas/runtime/config.hpp), parsed,
// rejected with a message, and printed back.

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "prfaas/runtime/config.hpp"

using namespace prfaas;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// A valid one-node deployment, for a setting read back through the parser.
const std::string one_node = R"(deployment: d
nodes:
  - { name: n0, control: "tcp://127.0.0.1:7100", data: "tcp://127.0.0.1:7200" }
)";

} // namespace

TEST_CASE("parse_duration accepts every unit and decimals", "[config]") {
  const std::vector<std::pair<std::string, duration>> good = {
      {"0", 0ns},
      {"0s", 0ns},
      {"100ns", 100ns},
      {"500us", 500us},
      {"200ms", 200ms},
      {"10s", 10s},
      {"2m", 2min},
      {"1h", 1h},
      {"1.5s", 1500ms},
      {"0.25ms", 250us},
      {"1.000000001s", 1'000'000'001ns},
      {"007s", 7s},
      {"24h", 86'400s},
      {"9223372036854775807ns", duration::max()},
  };
  for (const auto& [text, expected] : good) {
    CAPTURE(text);
    CHECK(parse_duration(text) == expected);
  }
}

TEST_CASE("parse_duration rejects garbage", "[config]") {
  for (std::string text :
       {"", "s", "10", "-1s", "+1s", "1.s", ".5s", "1 s", "10 parsecs", "1S", "1sec", "1d", "1.5ns",
        "1e3ms", "abc", "1s ", "1ms2", "9223372036854775808ns", "99999999999999999999h"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_duration(text), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_duration("10 parsecs"), Contains("invalid duration \"10 parsecs\""));
}

TEST_CASE("format_duration picks the largest exact unit", "[config]") {
  CHECK(format_duration(200ms) == "200ms");
  CHECK(format_duration(10s) == "10s");
  CHECK(format_duration(1500ms) == "1500ms");
  CHECK(format_duration(2min) == "2m");
  CHECK(format_duration(1h) == "1h");
  CHECK(format_duration(90min) == "90m");
  CHECK(format_duration(7ns) == "7ns");
  CHECK(format_duration(3us) == "3us");
  CHECK(format_duration(0ns) == "0s");
  for (duration d : {duration{1}, duration{123456789}, duration{3'600'000'000'000}})
    CHECK(parse_duration(format_duration(d)) == d);
}

TEST_CASE("format_bytes and format_rate pick the largest exact unit", "[config]") {
  CHECK(format_bytes(1ull << 30) == "1GiB");
  CHECK(format_bytes(64ull << 20) == "64MiB");
  CHECK(format_bytes(1536) == "1536"); // 1.5 KiB: no exact binary unit
  CHECK(format_bytes(0) == "0");
  CHECK(format_bytes(1ull << 40) == "1TiB");
  CHECK(format_rate(1'000'000'000) == "1gbit");
  CHECK(format_rate(100'000'000) == "100mbit");
  CHECK(format_rate(1'500'000'000) == "1500mbit");
  CHECK(format_rate(7) == "7bit");
  CHECK(format_rate(0) == "0bit");
  for (uint64_t b : {uint64_t{1}, uint64_t{4096}, uint64_t{3} << 30, uint64_t{123456789}})
    CHECK(parse_bytes(format_bytes(b)) == b);
  for (uint64_t r : {uint64_t{1}, uint64_t{25'000'000}, uint64_t{10'000'000'000}, uint64_t{999}})
    CHECK(parse_rate(format_rate(r)) == r);
}

TEST_CASE("parse_bytes accepts decimal and binary units", "[config]") {
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"0", 0},
      {"4096", 4096},
      {"1B", 1},
      {"1KB", 1000},
      {"1kb", 1000},
      {"2MB", 2'000'000},
      {"1GB", 1'000'000'000},
      {"1TB", 1'000'000'000'000},
      {"1KiB", 1024},
      {"4MiB", 4u << 20},
      {"256MiB", 256u << 20},
      {"1GiB", uint64_t{1} << 30},
      {"2TiB", uint64_t{2} << 40},
      {"1.5KiB", 1536},
      {"0.5MB", 500'000},
      {"18446744073709551615", 18446744073709551615u},
  };
  for (const auto& [text, expected] : good) {
    CAPTURE(text);
    CHECK(parse_bytes(text) == expected);
  }
  for (std::string text : {"", "KiB", "-1", "1.5", "1.5B", "1 MiB", "12 potatoes", "1Mi", "1XB",
                           "0x10", "18446744073709551616", "17179869184GiB"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_bytes(text), std::invalid_argument);
  }
}

TEST_CASE("parse_rate accepts bits and bytes per second", "[config]") {
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"1000", 1000},
      {"1000bit", 1000},
      {"10kbit", 10'000},
      {"100mbit", 100'000'000},
      {"1gbit", 1'000'000'000},
      {"1Gbit", 1'000'000'000},
      {"1.5gbit", 1'500'000'000},
      {"2tbit", 2'000'000'000'000},
      {"1Bps", 8},
      {"1KBps", 8'000},
      {"125MBps", 1'000'000'000},
      {"1GBps", 8'000'000'000},
      {"1mbps", 8'000'000},
  };
  for (const auto& [text, expected] : good) {
    CAPTURE(text);
    CHECK(parse_rate(text) == expected);
  }
  for (std::string text :
       {"", "gbit", "-1gbit", "1 gbit", "1gb", "1.5", "1.5bit", "fast", "1gibit", "1e9bit"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_rate(text), std::invalid_argument);
  }
}

TEST_CASE("log levels print as their config spelling", "[config]") {
  CHECK(to_string(log_level::trace) == "trace");
  CHECK(to_string(log_level::debug) == "debug");
  CHECK(to_string(log_level::info) == "info");
  CHECK(to_string(log_level::warn) == "warn");
  CHECK(to_string(log_level::error) == "error");
  CHECK(to_string(log_level::off) == "off");
  for (auto level : {log_level::trace, log_level::error, log_level::off}) {
    auto cfg = parse_deployment(one_node + "log_level: " + to_string(level) + "\n", "<string>");
    CHECK(cfg.log == level);
  }
}

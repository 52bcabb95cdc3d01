#include <catch2/catch.hpp>

#include "loadgen/results.hpp"

using namespace prfaas::loadgen;

namespace {

request_result ok(double ttft_s, double e2e_s, uint32_t out, uint32_t in = 100) {
  request_result r;
  r.input_tokens = in;
  r.output_tokens = out;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  return r;
}

request_result failed(outcome o, int http = 0) {
  request_result r;
  r.status = o;
  r.http_status = http;
  r.e2e_s = 0.01;
  return r;
}

} // namespace

TEST_CASE("results: nearest-rank percentiles, mean and max") {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i)
    v.push_back(i);
  auto d = summarize(v);
  CHECK(d.count == 100);
  CHECK(d.mean == Approx(50.5));
  // rank = round(p/100 * (n - 1)): p50 -> 50 (0-based) -> 51, p90 -> 89 -> 90, p99 -> 98 -> 99.
  CHECK(d.p50 == 51);
  CHECK(d.p90 == 90);
  CHECK(d.p99 == 99);
  CHECK(d.max == 100);
  auto one = summarize({7.0});
  CHECK(one.p50 == 7);
  CHECK(one.p99 == 7);
  CHECK(summarize({}).count == 0);
}

TEST_CASE("results: TPOT, overhead and the error key of one request") {
  auto r = ok(0.100, 1.100, 11);
  REQUIRE(r.tpot_s());
  CHECK(*r.tpot_s() == Approx(0.1)); // (1.1 - 0.1) / (11 - 1)
  CHECK_FALSE(ok(0.1, 0.1, 1).tpot_s());
  CHECK_FALSE(r.overhead_ms()); // no prfaas object
  r.prfaas.present = true;
  r.prfaas.engine_prefill_ms = 60;
  r.prfaas.transfer_wire_ms = 15;
  REQUIRE(r.overhead_ms());
  CHECK(*r.overhead_ms() == Approx(25.0)); // 100 - 60 - 15
  CHECK(failed(outcome::http_error, 429).kind() == "http_429");
  CHECK(failed(outcome::stream_error).kind() == "stream_error");
  CHECK(r.kind() == "ok");
}

TEST_CASE("results: throughput, goodput under SLOs, errors and routes") {
  std::vector<request_result> rs;
  rs.push_back(ok(0.2, 0.2 + 0.020 * 9, 10, 1000)); // TPOT 20 ms: meets 25 ms
  rs.push_back(ok(0.2, 0.2 + 0.030 * 9, 10, 1000)); // TPOT 30 ms: misses
  rs.push_back(ok(3.0, 3.0 + 0.010 * 9, 10, 1000)); // TPOT 10 ms, TTFT 3 s
  rs.push_back(ok(0.5, 0.5, 1, 500));               // one token: no TPOT, passes that part
  rs[0].prfaas = {true, "a", "prfaas", 150, 30, 190, 1};
  rs[1].prfaas = {true, "b", "pd", 180, 0, 195, 1};
  rs[2].prfaas = {true, "c", "prfaas", 2900, 40, 2950, 2, 12.0};
  rs.push_back(failed(outcome::http_error, 429));
  rs.push_back(failed(outcome::http_error, 429));
  rs.push_back(failed(outcome::stream_error));
  rs.push_back(failed(outcome::client_saturated));

  slo_config no_ttft_bound; // TPOT <= 25 ms only
  auto s = summarize_run(rs, no_ttft_bound, 2.0);
  CHECK(s.total == 8);
  CHECK(s.ok == 4);
  CHECK(s.failed == 3);
  CHECK(s.saturated == 1);
  CHECK(s.slo_met == 3); // rs[0], rs[2], rs[3]
  REQUIRE(s.goodput_per_s);
  CHECK(*s.goodput_per_s == Approx(1.5));
  CHECK(s.requests_per_s == Approx(2.0));
  CHECK(s.input_tokens == 3500);
  CHECK(s.input_tokens_per_s == Approx(1750));
  CHECK(s.output_tokens == 31);
  CHECK(s.output_tokens_per_s == Approx(15.5));
  CHECK(s.errors == std::map<std::string, size_t>{
                        {"http_429", 2}, {"stream_error", 1}, {"client_saturated", 1}});
  CHECK(s.routes == std::map<std::string, size_t>{{"prfaas", 2}, {"pd", 1}});
  CHECK(s.ttft_ms.count == 4);
  CHECK(s.ttft_ms.max == Approx(3000));
  CHECK(s.tpot_ms.count == 3);
  // Overhead: 200-150-30 = 20, 200-180-0 = 20, 3000-2900-40 = 60.
  CHECK(s.overhead_ms.count == 3);
  CHECK(s.overhead_ms.p50 == Approx(20));
  CHECK(s.overhead_ms.p99 == Approx(60));
  CHECK(s.overhead_ms.mean == Approx(100.0 / 3));
  CHECK(s.prefill_queue_ms.count == 1); // only rs[2] reported its queue
  CHECK(s.prefill_queue_ms.max == 12.0);

  slo_config tight{1000.0, 25.0}; // TTFT <= 1 s drops rs[2]
  auto t = summarize_run(rs, tight, 2.0);
  CHECK(t.slo_met == 2);
  CHECK(*t.goodput_per_s == Approx(1.0));

  auto j = to_json(s);
  CHECK(j["requests"]["ok"] == 4);
  CHECK(j["requests"]["client_saturated"] == 1);
  CHECK(j["errors"]["http_429"] == 2);
  CHECK(j["goodput"]["slo_ttft_ms"].is_null());
  CHECK(j["goodput"]["slo_tpot_ms"] == 25.0);
  CHECK(j["overhead_ms"]["p99"] == Approx(60));
  auto table = format_report(s);
  CHECK_THAT(table, Catch::Contains("http_429 2"));
  CHECK_THAT(table, Catch::Contains("raise --max-in-flight"));
  CHECK_THAT(table, Catch::Contains("prfaas 2"));
}

TEST_CASE("results: without streaming there is no TTFT, so no goodput") {
  request_result r;
  r.output_tokens = 8;
  r.e2e_s = 1;
  auto s = summarize_run({r}, {}, 1.0);
  CHECK(s.ok == 1);
  CHECK_FALSE(s.goodput_per_s);
  CHECK(to_json(s)["goodput"]["requests_per_s"].is_null());
}

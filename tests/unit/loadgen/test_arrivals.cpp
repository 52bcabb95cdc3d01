#include <cmath>

#include <catch2/catch.hpp>

#include "loadgen/workload.hpp"

using namespace prfaas::loadgen;

TEST_CASE("arrivals: poisson gaps average 1/rate") {
  poisson_arrivals p{4.0};
  std::mt19937_64 rng{7};
  const int n = 100000;
  double last = 0, t = 0;
  for (int i = 0; i < n; ++i) {
    t = p.next(rng);
    REQUIRE(t >= last);
    last = t;
  }
  CHECK(t / n == Approx(0.25).epsilon(0.02));
}

TEST_CASE("arrivals: on/off bursts have no arrivals while idle") {
  const double on = 1.0, off = 2.0, rate = 50;
  on_off_arrivals p{rate, on, off};
  std::mt19937_64 rng{11};
  double t = 0;
  size_t bursts_seen = 0, last_burst = SIZE_MAX;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    t = p.next(rng);
    double phase = std::fmod(t, on + off);
    REQUIRE(phase < on);
    auto burst = static_cast<size_t>(t / (on + off));
    if (burst != last_burst)
      ++bursts_seen, last_burst = burst;
  }
  CHECK(bursts_seen > 300);
  // Mean rate over the whole run: rate * on / (on + off).
  CHECK(n / t == Approx(rate * on / (on + off)).epsilon(0.03));
  arrival_config c;
  c.kind = arrival_kind::bursty;
  c.rate = rate, c.burst_on_s = on, c.burst_off_s = off;
  CHECK(c.mean_rate() == Approx(rate / 3));
}

TEST_CASE("arrivals: a 2-state MMPP alternates a busy and a silent state") {
  const double rate[2] = {20, 0}, dwell[2] = {1, 3};
  mmpp2_arrivals p{rate, dwell};
  std::mt19937_64 rng{3};
  const int n = 40000;
  double t = 0, last = 0, longest_gap = 0;
  for (int i = 0; i < n; ++i) {
    t = p.next(rng);
    REQUIRE(t >= last);
    longest_gap = std::max(longest_gap, t - last);
    last = t;
  }
  // Stationary mean rate: (20 * 1 + 0 * 3) / 4 = 5 req/s.
  CHECK(n / t == Approx(5.0).epsilon(0.1));
  // Silent periods (mean 3 s) show up as gaps no Poisson(20) would produce.
  CHECK(longest_gap > 5);
}

TEST_CASE("arrivals: configurations out of range name their option") {
  arrival_config c;
  c.rate = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("--rate"));
  c.kind = arrival_kind::closed;
  c.concurrency = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("--concurrency"));
  CHECK_THROWS_AS(parse_arrival_kind("steady"), std::invalid_argument);
  CHECK(parse_arrival_kind("mmpp") == arrival_kind::mmpp);
}

namespace {

std::vector<request_spec> take(request_source& s, size_t n) {
  std::vector<request_spec> out;
  while (out.size() < n) {
    auto r = s.next();
    if (!r)
      break;
    out.push_back(*r);
  }
  return out;
}

synthetic_config paper_config(size_t requests) {
  synthetic_config c;
  c.arrivals.rate = 2.0;
  c.stop.max_requests = requests;
  return c;
}

} // namespace

TEST_CASE("workload: the same seed replays the same workload, another seed does not") {
  std::mt19937_64 a{42}, b{42}, c{43};
  synthetic_workload wa{paper_config(500), a}, wb{paper_config(500), b}, wc{paper_config(500), c};
  auto ra = take(wa, 1000), rb = take(wb, 1000), rc = take(wc, 1000);
  REQUIRE(ra.size() == 500); // --requests stops it
  CHECK(ra == rb);
  CHECK(prompt_text(ra[17]) == prompt_text(rb[17]));
  REQUIRE(rc.size() == 500);
  size_t same_input = 0;
  for (size_t i = 0; i < ra.size(); ++i)
    same_input += ra[i].input_tokens == rc[i].input_tokens;
  CHECK(same_input < 10);
  CHECK(ra[0].arrival_s != rc[0].arrival_s);
  CHECK(ra[0].prompt_seed != rc[0].prompt_seed);
  for (auto& r : ra) {
    CHECK(r.output_tokens == 1024);
    CHECK(r.input_tokens >= 128);
    CHECK(r.input_tokens <= 131072);
  }
}

TEST_CASE("workload: the arrival process does not change the lengths") {
  auto poisson = paper_config(200);
  auto bursty = paper_config(200);
  bursty.arrivals.kind = arrival_kind::bursty;
  std::mt19937_64 a{5}, b{5};
  synthetic_workload wa{poisson, a}, wb{bursty, b};
  auto ra = take(wa, 200), rb = take(wb, 200);
  for (size_t i = 0; i < ra.size(); ++i) {
    CHECK(ra[i].input_tokens == rb[i].input_tokens);
    CHECK(ra[i].prompt_seed == rb[i].prompt_seed);
  }
  CHECK(ra.back().arrival_s != rb.back().arrival_s);
}

TEST_CASE("workload: duration, closed loop and fixed lengths") {
  synthetic_config c;
  c.input = {length_dist::fixed, 300, {}};
  c.output = {length_dist::lognormal, 0, {4.0, 1.0, 1, 100}};
  c.arrivals.rate = 10;
  c.stop.duration_s = 30;
  std::mt19937_64 rng{9};
  synthetic_workload w{c, rng};
  CHECK_FALSE(w.size());
  auto all = take(w, 100000);
  REQUIRE(all.size() > 200);
  CHECK(all.size() < 400);
  for (auto& r : all) {
    CHECK(r.arrival_s <= 30);
    CHECK(r.input_tokens == 300);
    CHECK(r.output_tokens >= 1);
    CHECK(r.output_tokens <= 100);
  }
  CHECK_FALSE(w.next()); // stays over

  synthetic_config closed;
  closed.arrivals.kind = arrival_kind::closed;
  closed.arrivals.concurrency = 4;
  closed.stop.max_requests = 10;
  synthetic_workload wc{closed, rng};
  REQUIRE(wc.size() == 10u);
  auto cs = take(wc, 100);
  REQUIRE(cs.size() == 10);
  for (auto& r : cs)
    CHECK(r.arrival_s == 0);

  synthetic_config unbounded;
  CHECK_THROWS_WITH(synthetic_workload(unbounded, rng), Catch::Contains("--requests"));
}

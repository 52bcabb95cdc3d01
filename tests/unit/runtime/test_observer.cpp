// What a node remembers for the cluster page: histogram quantiles from bucket counts
// (as Prometheus's histogram_quantile computes them), the sampled time series, the
// windowed quantiles from bucket increases, and the bounded recent events.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/observer.hpp"

using namespace prfaas;
using json = nlohmann::json;

TEST_CASE("bucket_quantile interpolates inside the bucket like histogram_quantile") {
  const double inf = std::numeric_limits<double>::infinity();
  // 10 observations: 2 in (0, 1], 6 in (1, 2], 2 in (2, 4].
  const std::vector<std::pair<double, double>> b{{1, 2}, {2, 8}, {4, 10}, {inf, 10}};
  CHECK(bucket_quantile(0.5, b) == Approx(1.5)); // rank 5: 3 of 6 into (1, 2]
  CHECK(bucket_quantile(0.1, b) == Approx(0.5)); // rank 1: half of (0, 1]
  CHECK(bucket_quantile(0.9, b) == Approx(3.0)); // rank 9: half of (2, 4]
  CHECK(bucket_quantile(1.0, b) == Approx(4.0));
  // A quantile in the +Inf bucket is the last finite bound.
  CHECK(bucket_quantile(0.99, {{1, 1}, {inf, 10}}) == Approx(1.0));
  CHECK(std::isnan(bucket_quantile(0.5, {{1, 0}, {inf, 0}})));
  CHECK(std::isnan(bucket_quantile(0.5, {})));
}

TEST_CASE("observer: time series of t, quantiles over the window's increase, events") {
  auto m = std::make_shared<metrics>("n1");
  node_observer obs{m,
                    {.period = std::chrono::milliseconds(2000),
                     .samples = 3,
                     .window = std::chrono::seconds(12)}};
  auto& t = m->gauge("prfaas_scheduler_threshold_tokens", "t");
  auto& ttft = m->histogram("prfaas_gateway_ttft_seconds", "ttft", {0.1, 1, 10}, {{"route", "pd"}});
  m->gauge("prfaas_unrelated", "not sampled").Set(7);
  t.Set(256);
  for (int i = 0; i < 5; ++i)
    ttft.Observe(5); // old: before the window
  obs.sample(100);
  t.Set(512);
  obs.sample(102);
  for (int i = 0; i < 4; ++i)
    ttft.Observe(0.05); // in the window
  t.Set(1024);
  obs.sample(104);
  obs.sample(115); // four samples, three kept: 102, 104, 115
  m->recent().record("threshold", R"({"from":256,"to":512})");
  const auto o = json::parse(obs.overview_json());
  CHECK(o["node"] == "n1");
  CHECK(o["history"]["times"] == json::array({102.0, 104.0, 115.0}));
  bool found_t = false;
  for (auto& s : o["history"]["series"])
    if (s["name"] == "prfaas_scheduler_threshold_tokens") {
      found_t = true;
      CHECK(s["values"] == json::array({512.0, 1024.0, 1024.0}));
    }
  CHECK(found_t);
  for (auto& c : o["current"])
    CHECK(c["name"] != "prfaas_unrelated");
  // The window reaches 12 s back from 115: its base is the newest sample at least that
  // old, 102, so the increase holds the four observations made after it.
  auto& q = o["quantiles"]["ttft_seconds"]["pd"];
  CHECK(q["count"] == 4.0);
  CHECK(q["p50"].get<double>() == Approx(0.05)); // rank 2 of 4, all in (0, 0.1]
  CHECK(o["quantiles"]["window_s"] == 12);
  CHECK(o["events"]["threshold"].size() == 1);
}

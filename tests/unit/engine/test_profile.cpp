#include "engine_test_util.hpp"

#include "prfaas/engine/profile.hpp"

#include <cmath>
#include <filesystem>

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

const std::string profiles_dir = std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/";
constexpr double mib = 1024.0 * 1024.0;

profile load(const std::string& file) {
  auto p = load_profile(profiles_dir + file);
  INFO((p.ok() ? std::string() : p.message()));
  REQUIRE(p.ok());
  return std::move(p).value();
}

/// Case-study workload: log-normal(9.90, 1.00) truncated to [128, 128K].
struct lognormal {
  double mu = 9.90, sigma = 1.00, lo = 128, hi = 131072;
  double cdf(double x) const {
    return 0.5 * (1 + std::erf((std::log(x) - mu) / (sigma * std::sqrt(2.0))));
  }
  double partial(double x) const { // ∫ L f(L) dL from 0 to x
    return std::exp(mu + sigma * sigma / 2) * 0.5 *
           (1 + std::erf((std::log(x) - mu - sigma * sigma) / (sigma * std::sqrt(2.0))));
  }
  double mean_between(double a, double b) const {
    return (partial(b) - partial(a)) / (cdf(b) - cdf(a));
  }
};

} // namespace

TEST_CASE("every shipped profile loads") {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(profiles_dir)) {
    if (f.path().extension() != ".yaml")
      continue;
    auto p = load_profile(f.path().string());
    INFO(f.path().string() << ": " << (p.ok() ? std::string() : p.message()));
    REQUIRE(p.ok());
    CHECK_FALSE(p->name.empty());
    CHECK_FALSE(p->model.empty());
    CHECK(p->gpus == 8);
    CHECK(p->phi_gbps(16384) > 0);
    ++n;
  }
  CHECK(n == 8); // 2 timing profiles (H200, H20) + 6 Table 3 Φ_kv-only profiles
}

TEST_CASE("H200 profile reproduces Table 5 exactly") {
  const profile p = load("kimi-linear-1t-h200.yaml");
  REQUIRE(p.has_timing());
  const struct {
    uint64_t tokens;
    double kv_mib, prefill_s, phi;
  } table5[] = {{1024, 190.8, 0.44, 3.61},
                {8192, 308.9, 0.72, 3.59},
                {32768, 701.3, 1.84, 3.19},
                {131072, 2316.3, 7.40, 2.62}};
  for (const auto& row : table5) {
    INFO("tokens " << row.tokens);
    CHECK(p.kv_bytes(row.tokens) == row.kv_mib * mib);
    CHECK(p.prefill_seconds(row.tokens) == row.prefill_s);
    const double phi = p.phi_gbps(row.tokens);
    CHECK(std::abs(phi / row.phi - 1) < 0.02);
    CHECK(std::abs(phi / row.phi - 1) < 0.009); // the MiB→Gbps(1e9) convention, see profile
  }
}

TEST_CASE("H200 profile interpolates monotonically and extrapolates sensibly") {
  const profile p = load("kimi-linear-1t-h200.yaml");
  double prev_t = 0, prev_kv = 0;
  for (uint64_t l = 1; l <= 262144; l = l * 5 / 4 + 1) {
    const double t = p.prefill_seconds(l), kv = p.kv_bytes(l);
    INFO("tokens " << l);
    CHECK(t >= prev_t);
    CHECK(kv >= prev_kv);
    prev_t = t;
    prev_kv = kv;
  }
  // S_kv(0): the linear state, ≈ 172 MiB; ≈ 17 KB per token beyond.
  CHECK(p.kv_bytes(0) / mib > 170);
  CHECK(p.kv_bytes(0) / mib < 176);
  const double per_token = (p.kv_bytes(131072) - p.kv_bytes(32768)) / (131072 - 32768);
  CHECK(per_token > 16000);
  CHECK(per_token < 18000);
  // Prefill beyond 128K grows super-linearly; below 1K it keeps a fixed overhead.
  CHECK(p.prefill_seconds(262144) > 2 * p.prefill_seconds(131072));
  CHECK(p.prefill_seconds(128) > 0.3);
  CHECK(p.prefill_seconds(128) < 0.44);
  // Interpolated between points.
  CHECK(p.prefill_seconds(16384) > 0.72);
  CHECK(p.prefill_seconds(16384) < 1.84);
}

TEST_CASE("H20 profile reproduces the Table 6 throughputs it is derived from") {
  const profile h20 = load("kimi-linear-1t-h20.yaml");
  const profile h200 = load("kimi-linear-1t-h200.yaml");
  const lognormal w;
  const double l_avg = w.mean_between(w.lo, w.hi);
  const double l_short = w.mean_between(w.lo, 19.4 * 1024);
  CHECK(std::abs(l_avg - 27486) < 2);
  CHECK(std::abs(l_short - 10402) < 2);
  // Eq. 4: homogeneous PD, 9 H20 prefill instances → 2.11 req/s.
  CHECK(std::abs(9 / h20.prefill_seconds(27486) / 2.11 - 1) < 0.002);
  // Eq. 4: PrfaaS-PD, 3 PD-P instances on the short requests → 1.64 req/s.
  CHECK(std::abs(3 / h20.prefill_seconds(10402) / 1.64 - 1) < 0.002);
  // H20 prefill ≈ 2.2–2.7× slower than H200 at every length.
  for (uint64_t l : {1024, 8192, 16384, 32768, 65536, 131072}) {
    const double ratio = h20.prefill_seconds(l) / h200.prefill_seconds(l);
    INFO("tokens " << l << " ratio " << ratio);
    CHECK(ratio > 2.2);
    CHECK(ratio < 2.7);
  }
  // Same model, same KV sizes.
  CHECK(h20.kv_bytes(50000) == Approx(h200.kv_bytes(50000)).epsilon(1e-6));
  // Eq. 5: BS_max = 20 at 40 tokens/s, 0.78 req/s per instance with 1024 output tokens.
  const auto ctx = static_cast<uint64_t>(l_avg + 512);
  CHECK(h20.max_batch(ctx) == 20);
  const double theta_d = 20 / (h20.decode_seconds(20, ctx) * 1024);
  CHECK(std::abs(theta_d - 0.78) < 0.01);
  CHECK(h20.decode_seconds(20, ctx) <= 1.0 / 40 + 1e-9);
  CHECK(h200.max_batch(ctx) > 20);
}

TEST_CASE("Table 3 phi-only profiles") {
  const struct {
    const char* file;
    double phi[4];
  } table3[] = {{"kimi-linear-48b-h200.yaml", {1.19, 2.29, 3.87, 4.88}},
                {"mimo-v2-flash-h200.yaml", {0.82, 2.85, 4.66, 4.71}},
                {"qwen3.5-397b-h200.yaml", {4.13, 6.28, 8.25, 7.47}},
                {"ring-2.5-1t-h200.yaml", {7.27, 4.47, 2.59, 1.46}},
                {"minimax-m2.5-h200.yaml", {4.94, 32.87, 59.93, 47.82}},
                {"qwen3-235b-h200.yaml", {4.12, 22.42, 33.35, 21.50}}};
  const uint64_t lengths[4] = {1024, 8192, 32768, 131072};
  for (const auto& row : table3) {
    const profile p = load(row.file);
    INFO(row.file);
    CHECK_FALSE(p.has_timing());
    for (int i = 0; i < 4; ++i)
      CHECK(p.phi_gbps(lengths[i]) == row.phi[i]);
    const double mid = p.phi_gbps(20480);
    CHECK(mid >= std::min(row.phi[1], row.phi[2]));
    CHECK(mid <= std::max(row.phi[1], row.phi[2]));
  }
}

TEST_CASE("profile errors name the key") {
  const std::string head = "name: x\nmodel: m\nhardware: h\ngpus: 8\n";
  auto r = parse_profile(head + "layers: 8\nlinear_per_full: 3\nprefill_points:\n"
                                "  - {tokens: 10, kv_mib: 1, prefill_s: 1}\n"
                                "  - {tokens: 20, kv_mib: 2}\n",
                         "t.yaml");
  CHECK(contains(r.message(), "profile t.yaml: missing key 'prefill_points[1].prefill_s'"));
  r = parse_profile(head + "layers: 8\nlinear_per_full: 3\nprefill_points:\n"
                           "  - {tokens: 10, kv_mib: 1, prefill_s: 1}\n"
                           "  - {tokens: 20, kv_mib: 2, prefill_s: 0.5}\n",
                    "t.yaml");
  CHECK(contains(r.message(), "prefill_points[1].' must increase"));
  r = parse_profile("name: [1, 2]\n", "t.yaml");
  CHECK(contains(r.message(), "'name' has the wrong type"));
  r = parse_profile(head, "t.yaml");
  CHECK(contains(r.message(), "missing key 'prefill_points'"));
  r = parse_profile(head + "layers: 7\nlinear_per_full: 3\nprefill_points: []\n", "t.yaml");
  CHECK(contains(r.message(), "multiple of linear_per_full"));
  r = parse_profile("{{{", "t.yaml");
  CHECK(contains(r.message(), "YAML error"));
  CHECK(contains(load_profile("/nonexistent.yaml").message(), "cannot open"));
}

// bench_engine — prints the engine library's throughput figures (human-readable lines,
// then one JSON line): reference engine prefill/decode tokens/s, block hashing GB/s and
// the time to hash a 128K-token prompt, hybrid pool insert/lookup/evict ops/s.
// Timing uses std::chrono::steady_clock directly: this is a benchmark, not engine code.
#include "prfaas/engine/block_hash.hpp"
#include "prfaas/engine/block_pool.hpp"
#include "prfaas/engine/reference_engine.hpp"
#include "prfaas/engine/rng.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace prfaas::engine;
using steady = std::chrono::steady_clock;

namespace {

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<token> random_tokens(size_t n, uint64_t seed, uint32_t vocab) {
  xoshiro256 rng(seed);
  std::vector<token> t(n);
  for (auto& x : t)
    x = static_cast<token>(rng.below(vocab));
  return t;
}

struct engine_figures {
  double prefill_s = 0;  ///< a 4K-token prompt, median of 3
  double decode_tps = 0; ///< batch 8, context ~1.1K
};

/// Reference engine: prefill a 4K prompt (median of 3), then decode.
engine_figures bench_reference() {
  auto eng = reference_engine::create({}).value();
  const auto prompt = random_tokens(4096, 1, 256);
  std::vector<double> pre;
  for (int i = 0; i < 3; ++i) {
    prefill_request r;
    r.id = 100 + i;
    r.prompt = prompt;
    const auto t0 = steady::now();
    (void)eng->prefill(r, {});
    pre.push_back(seconds_since(t0));
  }
  engine_figures f{.prefill_s = median(pre)};
  std::vector<seq_id> batch;
  for (int i = 0; i < 8; ++i) {
    prefill_request r;
    r.id = i;
    auto p = random_tokens(1024, 10 + i, 256);
    r.prompt = p;
    (void)eng->prefill(r, {});
    batch.push_back(i);
  }
  const int steps = 64;
  auto t0 = steady::now();
  for (int s = 0; s < steps; ++s)
    (void)eng->decode_step(batch);
  f.decode_tps = steps * batch.size() / seconds_since(t0);
  std::printf("reference prefill: 4096 tokens in %.3f s = %.0f tokens/s\n", f.prefill_s,
              4096 / f.prefill_s);
  std::printf("reference decode: batch 8, context ~1.1K: %.0f tokens/s\n", f.decode_tps);
  return f;
}

struct hash_figures {
  std::string json; ///< per block size
  double us_128k_512 = 0, gbps_512 = 0;
};

/// Block hashing: 128K tokens at several block sizes; median of many runs.
hash_figures bench_hashing() {
  const auto big = random_tokens(131072, 2, 1u << 30);
  const double bytes = 131072.0 * sizeof(token);
  std::vector<block_id> ids;
  hash_figures f;
  for (uint32_t bt : {16u, 64u, 256u, 512u}) {
    block_hasher h(bt);
    std::vector<double> runs;
    for (int i = 0; i < 200; ++i) {
      const auto s0 = steady::now();
      h.hash_into(big, ids);
      runs.push_back(seconds_since(s0));
    }
    const double med = median(runs);
    std::printf(
        "hashing: block %3u tokens: 128K-token prompt in %.1f us = %.2f GB/s (median of 200)\n", bt,
        med * 1e6, bytes / med / 1e9);
    f.json += (f.json.empty() ? "" : ",") + std::string("\"block_") + std::to_string(bt) +
              "\":{\"us_128k\":" + std::to_string(med * 1e6) +
              ",\"gb_per_s\":" + std::to_string(bytes / med / 1e9) + "}";
    if (bt == 512) {
      f.us_128k_512 = med * 1e6;
      f.gbps_512 = bytes / med / 1e9;
    }
  }
  return f;
}

struct pool_figures {
  double insert_ops = 0, lookup_ops = 0, evict_ops = 0;
};

/// Pool: chains of 16 blocks into a pool of 65,536 blocks; inserts past capacity force
/// LRU evictions; lookups are prefix matches over a chain.
pool_figures bench_pool() {
  block_pool pool({65536, 0, 1});
  const int chains = 20000, len = 16;
  auto id_of = [](uint64_t c, uint64_t i) { return mix64((c << 8) | i); };
  auto t0 = steady::now();
  for (int c = 0; c < chains; ++c)
    for (int i = 0; i < len; ++i)
      (void)pool.insert_kv(id_of(c, i),
                           i == 0 ? std::nullopt : std::optional<block_id>(id_of(c, i - 1)));
  const double insert_s = seconds_since(t0);
  const auto st = pool.stats();
  xoshiro256 rng(3);
  std::vector<block_id> q(len);
  const int lookups = 200000;
  t0 = steady::now();
  uint64_t matched = 0;
  for (int k = 0; k < lookups; ++k) {
    const uint64_t c = chains - 1 - rng.below(4000);
    for (int i = 0; i < len; ++i)
      q[i] = id_of(c, i);
    matched += pool.match(q).kv_blocks;
  }
  const double lookup_s = seconds_since(t0);
  t0 = steady::now();
  const size_t evicted = pool.evict_unused();
  const double evict_s = seconds_since(t0);
  pool_figures f{.insert_ops = chains * len / insert_s,
                 .lookup_ops = lookups / lookup_s,
                 .evict_ops = evicted / evict_s};
  std::printf("pool: %.2f M inserts/s (%llu LRU evictions on the way), %.2f M prefix lookups/s "
              "(16 blocks each, %.1f matched avg), %.2f M evictions/s\n",
              f.insert_ops / 1e6, static_cast<unsigned long long>(st.evictions), f.lookup_ops / 1e6,
              static_cast<double>(matched) / lookups, f.evict_ops / 1e6);
  return f;
}

} // namespace

int main() {
  const auto e = bench_reference();
  const auto h = bench_hashing();
  const auto p = bench_pool();
  std::printf("{\"reference_prefill_tokens_per_s\":%.0f,\"reference_prefill_4k_s\":%.4f,"
              "\"reference_decode_tokens_per_s\":%.0f,\"hash\":{%s},"
              "\"hash_128k_us\":%.2f,\"hash_gb_per_s\":%.2f,"
              "\"pool_insert_ops\":%.0f,\"pool_lookup_ops\":%.0f,\"pool_evict_ops\":%.0f}\n",
              4096 / e.prefill_s, e.prefill_s, e.decode_tps, h.json.c_str(), h.us_128k_512,
              h.gbps_512, p.insert_ops, p.lookup_ops, p.evict_ops);
  return 0;
}

// Issue 5 item 3 on the head of the Mooncake trace (CI-fast; the whole trace is
// test_trace_replay_full.cpp, labelled slow, and `prfaas-sim cache-replay`): the prfaas
// policy's prefix-cache hit ratio is clearly above homogeneous PD with round-robin
// placement, and nothing beats the oracle (unlimited cache, perfect affinity).

#include "trace_fixture.hpp"

using namespace prfaas::sim;
using namespace prfaas::sim::test;

TEST_CASE("trace replay head: prfaas beats round-robin homogeneous PD and stays under the oracle") {
  const auto cfg = shipped_config();
  const auto reqs = trace_head(1000);
  REQUIRE(reqs.size() == 1000);
  const auto best = oracle(reqs, cfg.options);
  const auto prfaas = run(cfg, reqs, "prfaas", "prfaas-pd");
  const auto rr = run(cfg, reqs, "homogeneous_pd_round_robin", "homogeneous");
  INFO("token hit ratio: oracle " << best.token_ratio() << ", prfaas " << prfaas.hits.token_ratio()
                                  << ", homogeneous_pd_round_robin " << rr.hits.token_ratio());
  REQUIRE(best.hit_tokens > 0);
  CHECK(prfaas.hits.hit_tokens > 2 * rr.hits.hit_tokens);
  CHECK(prfaas.hits.hit_blocks > 2 * rr.hits.hit_blocks);
  CHECK(prfaas.hits.hit_tokens <= best.hit_tokens);
  CHECK(rr.hits.hit_tokens <= best.hit_tokens);
}

// Issue 5 item 3 on the head of the Mooncake trace, with the shipped replay config
// (configs/trace-replay.yaml: the paper's 4 PrfaaS + 3 PD prefill + 5 decode, and the
// 9 + 3 homogeneous baseline): the prfaas policy's prefix-cache hit ratio is at least
// 90% of the oracle's (unlimited cache, perfect affinity) and above homogeneous PD
// with round-robin placement. The whole trace: `prfaas-sim cache-replay`.

#include <catch2/catch.hpp>

#include "cache_replay_command.hpp"
#include "loadgen/trace.hpp"

using namespace prfaas;
using namespace prfaas::sim;

namespace {

constexpr size_t head = 1000; // requests: the full trace is the CLI's job, CI stays fast

std::vector<loadgen::request_spec> head_of_trace() {
  loadgen::trace_workload w(loadgen::load_trace(PRFAAS_MOONCAKE_TRACE), {}, {.max_requests = head});
  std::vector<loadgen::request_spec> out;
  while (auto r = w.next())
    out.push_back(std::move(*r));
  return out;
}

replay_result run(const replay_config& cfg, const std::vector<loadgen::request_spec>& reqs,
                  const std::string& policy, const std::string& deployment) {
  for (auto& r : cfg.runs) {
    if (r.policy != policy || r.deployment != deployment)
      continue;
    return replay(reqs, *make_policy(r, "trace-replay.yaml"), cfg.deployments.at(deployment),
                  cfg.options);
  }
  FAIL("configs/trace-replay.yaml has no run of " << policy << " on " << deployment);
  return {};
}

} // namespace

TEST_CASE("trace replay: prfaas gets >= 90% of the oracle's hits and beats round-robin PD") {
  const auto cfg = load_replay_config(PRFAAS_SOURCE_DIR "/configs/trace-replay.yaml");
  const auto reqs = head_of_trace();
  REQUIRE(reqs.size() == head);
  const auto best = oracle(reqs, cfg.options);
  const auto prfaas = run(cfg, reqs, "prfaas", "prfaas-pd");
  const auto rr = run(cfg, reqs, "homogeneous_pd", "homogeneous");
  INFO("oracle " << best.token_ratio() << ", prfaas " << prfaas.hits.token_ratio()
                 << ", homogeneous_pd " << rr.hits.token_ratio());
  REQUIRE(best.hit_tokens > 0);
  CHECK(prfaas.hits.hit_tokens >= 0.9 * double(best.hit_tokens));
  CHECK(prfaas.hits.hit_blocks >= 0.9 * double(best.hit_blocks));
  CHECK(prfaas.hits.hit_tokens > rr.hits.hit_tokens);
  CHECK(prfaas.hits.hit_tokens <= best.hit_tokens); // nothing beats unlimited cache
  CHECK(rr.hits.hit_tokens <= best.hit_tokens);
}

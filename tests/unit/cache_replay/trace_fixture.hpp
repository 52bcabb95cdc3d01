#pragma once

// The Mooncake trace and the shipped replay config (configs/trace-replay.yaml: the
// paper's 4 PrfaaS + 3 PD prefill + 5 decode, and the 9 + 3 homogeneous baseline) for
// the replay tests on the real trace.

#include <catch2/catch.hpp>

#include "cache_replay_command.hpp"
#include "loadgen/trace.hpp"

namespace prfaas::sim::test {

/// The first `n` requests of the trace (0 = all of them).
inline std::vector<loadgen::request_spec> trace_head(size_t n) {
  loadgen::trace_workload w(loadgen::load_trace(PRFAAS_MOONCAKE_TRACE), {}, {.max_requests = n});
  std::vector<loadgen::request_spec> out;
  while (auto r = w.next())
    out.push_back(std::move(*r));
  return out;
}

inline replay_config shipped_config() {
  return load_replay_config(PRFAAS_SOURCE_DIR "/configs/trace-replay.yaml");
}

/// The config's run of `policy` on `deployment`, replayed on `reqs`.
inline replay_result run(const replay_config& cfg, const std::vector<loadgen::request_spec>& reqs,
                         const std::string& policy, const std::string& deployment) {
  for (auto& r : cfg.runs)
    if (r.policy == policy && r.deployment == deployment)
      return replay(reqs, *make_policy(r, "trace-replay.yaml"), cfg.deployments.at(deployment),
                    cfg.options);
  FAIL("configs/trace-replay.yaml has no run of " << policy << " on " << deployment);
  return {};
}

} // namespace prfaas::sim::test

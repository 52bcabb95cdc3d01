// Issue 5 item 3 on the whole Mooncake trace: the prfaas policy's prefix-cache hit
// ratio against 90% of the oracle's (unlimited cache, perfect affinity).
//
// It holds only when a prefill worker's load counts the tokens it will compute. Today
// prefill_worker reports (and the scheduler books) the *prompt* tokens of its queue,
// cached prefixes included, and best_prefill weighs them 1:1 against the uncached
// tokens of the request: the worker holding a session's prefix looks loaded by its own
// cache hits, and an idle worker wins. On the whole trace (cache moves on, as the
// policy defaults) that gives 0.872 × oracle, and 0.935 once load counts computed
// tokens. The [!shouldfail] case records that defect; it starts failing — and should
// then become a plain check — once it is fixed.

#include "trace_fixture.hpp"

using namespace prfaas::sim;
using namespace prfaas::sim::test;

namespace {

double prfaas_to_oracle(bool load_counts_computed) {
  auto cfg = shipped_config();
  cfg.options.load_counts_computed = load_counts_computed;
  const auto reqs = trace_head(0);
  const auto best = oracle(reqs, cfg.options);
  const auto prfaas = run(cfg, reqs, "prfaas", "prfaas-pd");
  REQUIRE(best.hit_tokens > 0);
  // Tokens and blocks agree to the third digit; the token ratio is the one checked.
  return double(prfaas.hits.hit_tokens) / double(best.hit_tokens);
}

} // namespace

TEST_CASE("trace replay full: prfaas reaches 90% of the oracle when load counts computed tokens") {
  const double r = prfaas_to_oracle(true);
  INFO("prfaas / oracle hit tokens = " << r);
  CHECK(r >= 0.9);
}

TEST_CASE("trace replay full: prfaas with prompt-token load reports reaches 90% of the oracle",
          "[!shouldfail]") {
  const double r = prfaas_to_oracle(false);
  INFO("prfaas / oracle hit tokens = " << r);
  CHECK(r >= 0.9);
}

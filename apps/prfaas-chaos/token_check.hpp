#pragma once

// The live token checker: every request that completed must have received, token for
// token, what an undisturbed engine gives its prompt and sampling — whatever the faults
// did to the route (failover, resume on another decode node, retries). The engine is
// built beside the run from the deployment's own `model:` section (reference and
// profile engines are deterministic in prompt and seed; a profile engine runs on a
// manual clock here, so checking costs no modeled time).

#include <string>
#include <vector>

#include "load.hpp"
#include "report.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::chaos {

/// Compares the recorded token ids of every completed request in `records` (prfaas-bench
/// serve --record-tokens) with the engine's. Throws std::runtime_error when the engine
/// cannot be built or fails.
token_check check_tokens(const deployment_config& dep, const std::vector<request_record>& records);

} // namespace prfaas::chaos

#pragma once

// The decode worker's parameters as a deployment file gives them (declared once, with
// their defaults and docs) and their checks.

#include <string>
#include <vector>

#include "decode/decode_batcher.hpp"
#include "decode/early_transfers.hpp"
#include "prfaas/runtime/actor_registry.hpp"

namespace prfaas::serving {

/// What a decode worker runs with; every default is a member initialiser (the batcher's
/// and the early transfers' own), rendered into its parameter specs.
struct decode_worker_settings {
  decode_detail::decode_batcher::settings batch;
  early_transfer_limits early;
  /// How often held requests are checked for their deadline, and early transfers for
  /// their ttl.
  duration sweep_interval = std::chrono::milliseconds(100);
};

std::vector<param_spec> decode_params();
/// The typed settings of a decode worker's (validated) parameters.
decode_worker_settings decode_settings_of(const actor_params& p);
/// Throws config_error naming `path.<param>`.
void check_decode_params(const std::string& path, const actor_params& p);

} // namespace prfaas::serving

#pragma once

// The prefill worker's settings: its parameters as a deployment file gives them (each
// default written once, as a member initialiser, and rendered into the specs), and
// their checks.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::serving {

struct prefill_settings {
  size_t max_queue = 64;        ///< orders waiting at most; more are refused
  uint64_t cache_blocks = 1024; ///< prefix cache capacity in blocks (0 = no cache)
  uint32_t checkpoint_blocks = 1;
  duration pull_timeout = std::chrono::seconds(2);
  /// Prompts prefilled together in one engine call, where the engine gains from it
  /// (llama: sequences in its context at once).
  uint32_t max_batch = 4;
  std::string directory; ///< KV directory: node/actor or a local name; empty = none
  uint32_t layers_per_push = 1;
  /// How long a producer waits for a free send-pool buffer before building a message
  /// in fresh memory instead (kv_messages.hpp): back-pressure from the link, bounded.
  duration pool_wait = std::chrono::milliseconds(200);
};

std::vector<param_spec> prefill_params();
/// The typed settings of a prefill worker's (validated) parameters.
prefill_settings prefill_settings_of(const actor_params& p);
/// Throws config_error naming `path.<param>`.
void check_prefill_params(const std::string& path, const actor_params& p);

} // namespace prfaas::serving

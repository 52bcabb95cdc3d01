#pragma once

// The gateway's settings: its parameters as a deployment file gives them (declared once,
// with their defaults and docs), their checks, and the typed settings the actor runs with.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/http_frontend.hpp"
#include "prfaas/engine/tokenizer.hpp"
#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/node_context.hpp"

namespace prfaas::serving {

/// Every default is the member's initialiser (http_settings' and api_limits' too):
/// gateway_params() renders the parameter specs from a default-constructed one.
struct gateway_settings {
  address scheduler;
  duration control_timeout = std::chrono::seconds(2);
  uint32_t max_attempts = 2;
  uint32_t max_resumes = 2;
  duration stall_timeout = std::chrono::seconds(10);
  /// How often held requests are checked for their deadline and a silent decode worker.
  duration sweep_interval = std::chrono::milliseconds(50);
  http_settings http;
  api_limits limits;
  uint32_t block_tokens = 64; ///< model.block_tokens: how prompts are cut into block ids
  std::shared_ptr<const engine::tokenizer> tok; ///< the model's vocabulary and chat template
};

/// The parameters of actor type `gateway` (names, kinds, defaults, docs).
std::vector<param_spec> gateway_params();
/// Checks a gateway's parameters beyond their kinds; throws config_error naming the key.
void check_gateway_params(const std::string& path, const actor_params& p);
/// The settings of gateway `name` from its parameters and the deployment's model.
gateway_settings settings_of(const node_context& ctx, const std::string& name,
                             const actor_params& p);
/// "host:port" → (host, port); throws config_error at `where` otherwise.
std::pair<std::string, int> parse_listen(const std::string& text, const std::string& where);

} // namespace prfaas::serving

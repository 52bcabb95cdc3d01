#pragma once

// The decode worker's parameters as a deployment file gives them (declared once, with
// their defaults and docs) and their checks.

#include <string>
#include <vector>

#include "prfaas/runtime/actor_registry.hpp"

namespace prfaas::serving {

std::vector<param_spec> decode_params();
/// Throws config_error naming `path.<param>`.
void check_decode_params(const std::string& path, const actor_params& p);

} // namespace prfaas::serving

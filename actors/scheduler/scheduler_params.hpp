#pragma once

// The scheduler's parameters (routing, the short-term controller, and the long-term
// controller's from long_term.cpp), for its registration and configs/sample.yaml.

#include <vector>

#include "prfaas/runtime/actor_registry.hpp"

namespace prfaas::serving {

std::vector<param_spec> scheduler_params();

} // namespace prfaas::serving

#pragma once

// `prfaas-node status`: the deployment as its nodes see it, as a terminal table — each
// node's own health (its admin endpoint's /health), its incarnation and actors, and how
// the other nodes' failure detectors see it. The exit code says whether all is well, so
// scripts and probes can use it the way `kubectl get` or `ray status` are used.

#include <chrono>
#include <iosfwd>

#include "prfaas/runtime/config.hpp"

namespace prfaas::app {

/// Exit codes: 0 every node up; 1 some node down, suspect, unreachable or escalated.
/// (A configuration error is prfaas-node's exit code 2, before this runs.)
int run_status(const deployment_config& dep, std::ostream& out,
               std::chrono::milliseconds timeout = std::chrono::seconds(2));

} // namespace prfaas::app

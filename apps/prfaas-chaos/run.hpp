#pragma once

// One chaos run: set up the topology, start every node, drive the load, apply and undo
// the faults on schedule while watching for their detection, wait for every request
// to end, and judge.

#include <filesystem>
#include <optional>
#include <string>

#include "report.hpp"
#include "scenario.hpp"
#include "topology.hpp"

namespace prfaas::chaos {

/// Runs `s`; throws skipped when it cannot run here, std::runtime_error when the
/// deployment cannot be started or a fault cannot be applied.
report run_scenario(const scenario& s, const environment& env);

} // namespace prfaas::chaos

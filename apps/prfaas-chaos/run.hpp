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

struct run_options {
  /// False: blackholes match only their target's address and ports (the harness as
  /// it was), for the negative control that the collateral check must catch.
  bool precise_blackhole = true;
};

/// Runs `s`; throws skipped when it cannot run here, std::runtime_error when the
/// deployment cannot be started or a fault cannot be applied.
report run_scenario(const scenario& s, const environment& env, const run_options& opts = {});

} // namespace prfaas::chaos

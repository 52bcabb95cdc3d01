#pragma once

// The randomized live nemesis: a seeded schedule of overlapping faults over a whole
// deployment — kills (some restarted faster than the failure detector can notice),
// pauses long and short, blackholes one and two ways between random node sets, rate
// cuts and flaps of every declared link — for `prfaas-chaos run --random SEED`.
//
// Rules of the draw: the gateway's node is never killed or paused (its clients have no
// failover: that is the negative control's job); two faults never touch the same node
// or link at once (so each one's detection is observable and its undo unambiguous);
// faults start after 2 s and end by 10 s before the `duration` asked for; the load runs
// on until at least `heal_margin_s` after the last fault ends (the run may call it
// healed only 12 s after it ends), leaving a healed tail in which every request must
// succeed. Bounds: detection within 3 s where a node fault lasts
// long enough for the failure detector (≥ 1.5 s), within 5 s for a link down ≥ 3.5 s
// (the link monitor's down_after is 2 s), recovery within 20 s; rate cuts carry
// no detection bound (the verdict says whether the cut bound at all). The same seed and
// deployment give the same scenario.

#include <cstdint>
#include <string>

#include "prfaas/runtime/config.hpp"
#include "scenario.hpp"

namespace prfaas::chaos {

/// The load outlasts the last fault by this much: 10 s the run waits for a fault never
/// seen faulty, 2 s it adds, and 10 s of requests after that.
inline constexpr double heal_margin_s = 22;

struct nemesis_options {
  uint64_t seed = 1;
  size_t faults = 8;
  seconds duration{40}; ///< of the load (longer when the last fault needs it)
  double rate = 3;      ///< requests per second
};

/// Draws a scenario for deployment `d` (read from `deployment_path`, which the scenario
/// names). Fewer than `faults` when the deployment has too few disjoint targets for them
/// in the window (the scenario's name says how many were drawn). Throws
/// std::invalid_argument when `duration` leaves no window (under 14 s).
scenario random_scenario(const deployment_config& d, const std::string& deployment_path,
                         const nemesis_options& o);

/// The scenario as a file `prfaas-chaos run` reads back to the same faults.
std::string to_yaml(const scenario& s);

} // namespace prfaas::chaos

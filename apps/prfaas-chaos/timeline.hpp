#pragma once

// A scenario's faults as a schedule: each fault's apply and (if it ends) its undo, in
// time order. Plain data, for run.cpp and the unit tests.

#include <cstddef>
#include <vector>

#include "scenario.hpp"

namespace prfaas::chaos {

struct fault_event {
  double at_s;  ///< seconds after the load started
  size_t fault; ///< index into the scenario's faults
  bool apply;   ///< else undo
};

/// Every fault's events, earliest first; at the same instant an undo before an apply,
/// then file order.
std::vector<fault_event> timeline(const scenario& s);

/// Fault `fault` was applied `late` seconds after its time (its command was slow, or one
/// before it was): it still lasts its whole `for`, so its undo moves as late, and the
/// events from `next` on are put back in order. Without this a fault held up by a slow
/// command lasted only what was left of its time (a 3.6 s link cut, applied 7 s late,
/// lasted 0.4 s and was never detected).
void keep_duration(std::vector<fault_event>& events, size_t next, size_t fault, double late);

} // namespace prfaas::chaos

#pragma once

// How every live prfaas process configures CAF. One place, so the node binary, the
// benchmarks and the tests run the same scheduler.

#include <cstddef>

#include <caf/actor_system_config.hpp>

namespace prfaas {

/// Sets `threads` scheduler threads (CAF defaults to 4 even on 2 cores), the
/// `sharing` scheduler policy and prfaas' message types.
///
/// Why `sharing`: CAF 0.17's work-stealing workers back off into 10 ms sleeps when
/// idle, and every request with a finite timeout wakes the clock thread; measured
/// here, a four-hop request chain took p50 138 us under `stealing` and 13.5 us under
/// `sharing` (a condition variable wakes workers at once). Cross-node round trips
/// are chains of such hops, so latency wins over stealing's throughput tricks.
void configure_actor_system(caf::actor_system_config& cfg, size_t threads = 2);

} // namespace prfaas

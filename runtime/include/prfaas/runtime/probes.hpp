#pragma once

// Named counters on rare paths — failover, resume, retry, rebuild, expiry — so a
// chaos run can show which recovery code it exercised. Each pass through a probe
// counts in the node's metrics as `prfaas_probe_hits_total{probe="..."}` and in a
// process-wide tally (a simulation runs every node in one process; the chaos sweep
// reads the tally). The inventory lists every probe; a name outside it is a bug and
// throws std::logic_error.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace prfaas {

class metrics;

struct probe_info {
  std::string_view name;
  std::string_view path; ///< the rare path it marks
  /// The deterministic chaos sweep can reach it (false: live-only paths, e.g. the
  /// ZeroMQ data plane's chunk re-sends, which the simulated data plane models as a
  /// rate instead).
  bool in_simulation = true;
};

/// Every probe in the code.
std::span<const probe_info> probe_inventory();

/// One pass through `probe` on the node whose metrics are `m`.
void probe_hit(metrics& m, std::string_view probe);

/// The process-wide tally: probe → passes since start (or the last reset).
std::map<std::string, uint64_t> probe_tally();
void reset_probe_tally();

} // namespace prfaas

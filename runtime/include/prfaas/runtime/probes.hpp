#pragma once

// Named counters on rare paths — failover, resume, retry, rebuild, expiry — so a
// chaos run can show which recovery code it exercised. Each pass through a probe
// counts in the node's metrics as `prfaas_probe_hits_total{probe="..."}` and in a
// process-wide tally (a simulation runs every node in one process; the chaos sweep
// reads the tally). The inventory lists every probe; a name outside it is a bug and
// throws std::logic_error. The runtime registers its own (transport, membership,
// supervision, data plane); each component registers the probes of its own code next to
// it, and plugins theirs, with PRFAAS_REGISTER_PROBES:
//
//   PRFAAS_REGISTER_PROBES(gateway_probes,
//     {"gateway.token_gap", "tokens went missing between a decode worker and the gateway"},
//     {"gateway.deadline", "a request reached its deadline and ended with 504"})

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prfaas {

class metrics;

struct probe_info {
  std::string_view name;
  std::string_view path; ///< the rare path it marks
  /// The deterministic chaos sweep can reach it (false: live-only paths, e.g. the data
  /// plane's TCP bulk connections, which simulation does not have).
  bool in_simulation = true;
  /// ... only with the real data plane (`prfaas-sim chaos --data-plane real`, the
  /// default): the fluid link model has no chunks to re-send.
  bool needs_real_data_plane = false;
};

/// Every probe registered: the runtime's, each linked component's, each loaded plugin's.
std::vector<probe_info> probe_inventory();

/// Adds probes to the inventory (at static initialisation or when a plugin loads). The
/// entries must outlive the process's use of them (string literals). A name registered
/// already keeps its first entry.
void register_probes(std::span<const probe_info> probes);

/// One pass through `probe` on the node whose metrics are `m`.
void probe_hit(metrics& m, std::string_view probe);

/// The process-wide tally: probe → passes since start (or the last reset).
std::map<std::string, uint64_t> probe_tally();
void reset_probe_tally();

} // namespace prfaas

/// Registers a component's probes at static initialisation; `id` names the registration
/// (unique in its translation unit).
#define PRFAAS_REGISTER_PROBES(id, ...)                                                            \
  namespace {                                                                                      \
  [[maybe_unused]] const bool prfaas_probes_##id = [] {                                            \
    static constexpr ::prfaas::probe_info entries[] = {__VA_ARGS__};                               \
    ::prfaas::register_probes(entries);                                                            \
    return true;                                                                                   \
  }();                                                                                             \
  }

#include "prfaas/runtime/probes.hpp"

#include <stdexcept>
#include <vector>

#include "named_tally.hpp"
#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

namespace {

/// The runtime's own probes; components register theirs beside their code.
constexpr probe_info runtime_probes[] = {
    {"transport.request_retry", "an unanswered cross-node request is sent again"},
    {"transport.duplicate_suppressed", "a request that arrived twice was answered once"},
    {"transport.request_timeout", "a cross-node request reached its deadline without an answer"},
    {"transport.orphaned_request", "a local actor stopped (crashed) before answering a cross-node "
                                   "request; the requester gets an error at once"},
    {"transport.stale_incarnation",
     "a frame addressed to an earlier incarnation of this node was dropped"},
    {"membership.peer_down", "the failure detector declared a peer down"},
    {"membership.peer_restarted", "a peer came back with a new incarnation"},
    {"membership.fenced",
     "a peer said it had declared this node down (it was paused or cut off); the node dropped "
     "the work it held for that peer"},
    {"supervisor.restart", "a crashed actor was restarted by its supervisor"},
    {"data.transfer_failed", "a KV transfer failed (timeout, unreachable or cancelled peer)"},
    {"data.chunk_retransmit", "a KV chunk was lost or corrupted on the wire and sent again", true,
     true},
    {"data.bulk_fallback",
     "a bulk (TCP) connection of the data plane broke; chunks went back to ZeroMQ", false},
};

detail::named_inventory<probe_info>& probes() {
  static detail::named_inventory<probe_info> r{runtime_probes};
  return r;
}

detail::named_tally& tally() {
  static detail::named_tally t;
  return t;
}

} // namespace

std::vector<probe_info> probe_inventory() {
  return probes().snapshot();
}

void register_probes(std::span<const probe_info> list) {
  probes().add(list);
}

void probe_hit(metrics& m, std::string_view probe) {
  const bool known = probes().contains(probe);
  if (!known)
    throw std::logic_error("probe \"" + std::string{probe} + "\" is not in the probe inventory");
  m.counter("prfaas_probe_hits_total",
            "Passes through named rare paths (failover, resume, retry, rebuild)",
            {{"probe", std::string{probe}}})
      .Increment();
  tally().add(probe);
}

std::map<std::string, uint64_t> probe_tally() {
  return tally().snapshot();
}

void reset_probe_tally() {
  tally().clear();
}

} // namespace prfaas

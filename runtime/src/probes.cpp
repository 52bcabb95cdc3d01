#include "prfaas/runtime/probes.hpp"

#include <array>
#include <mutex>
#include <stdexcept>

#include "named_tally.hpp"
#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

namespace {

constexpr std::array<probe_info, 19> inventory{{
  {"gateway.prefill_failover", "a prefill attempt failed (worker or node lost, transfer failed) and the request is re-routed"},
  {"gateway.decode_resume", "a request's decode node went down and the request continues on another decode worker"},
  {"gateway.token_gap", "tokens went missing between a decode worker and the gateway; the request resumes after the last one delivered"},
  {"gateway.stall_resume", "a decoding request was silent past stall_timeout and its decode worker no longer had it (it restarted); the request resumes elsewhere"},
  {"gateway.deadline", "a request reached its deadline and ended with 504"},
  {"scheduler.cache_blind", "the KV directory did not answer; the request is routed without cache knowledge"},
  {"kv_directory.rebuild", "a restarted KV directory is rebuilt from a worker's re-announcement"},
  {"transport.request_retry", "an unanswered cross-node request is sent again"},
  {"transport.duplicate_suppressed", "a request that arrived twice was answered once"},
  {"transport.request_timeout", "a cross-node request reached its deadline without an answer"},
  {"transport.orphaned_request", "a local actor stopped (crashed) before answering a cross-node request; the requester gets an error at once"},
  {"transport.stale_incarnation", "a frame addressed to an earlier incarnation of this node was dropped"},
  {"membership.peer_down", "the failure detector declared a peer down"},
  {"membership.peer_restarted", "a peer came back with a new incarnation"},
  {"supervisor.restart", "a crashed actor was restarted by its supervisor"},
  {"prefill.cancelled", "a prefill order was cancelled (failover or resume elsewhere)"},
  {"decode.order_expired", "a decode reservation ended because its KV never arrived (the lease ran out)"},
  {"data.transfer_failed", "a KV transfer failed (timeout, unreachable or cancelled peer)"},
  {"data.chunk_retransmit", "a KV chunk was lost or corrupted on the wire and sent again", false},
}};

detail::named_tally& tally() {
  static detail::named_tally t;
  return t;
}

} // namespace

std::span<const probe_info> probe_inventory() {
  return inventory;
}

void probe_hit(metrics& m, std::string_view probe) {
  bool known = false;
  for (auto& p : inventory)
    known = known || p.name == probe;
  if (!known)
    throw std::logic_error("probe \"" + std::string{probe} + "\" is not in the probe inventory");
  m.counter("prfaas_probe_hits_total", "Passes through named rare paths (failover, resume, retry, rebuild)",
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

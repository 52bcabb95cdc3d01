#pragma once

// The PrfaaS routing policies (paper §3.4) and the baselines they are
// compared with, as plain classes behind routing_policy:
//
//   prfaas               offload iff the *uncached* length exceeds t; bandwidth scarce
//                        vs abundant (bandwidth_mode) decides how caches count;
//                        cache-affine, load-aware prefill node; least-loaded decode.
//                        With `offload: cost`, the worker expected to have the KV at
//                        the decode side soonest, t deciding only while the link binds
//   homogeneous_pd       no PrfaaS cluster: every prefill in the PD cluster, to the
//                        worker with the least pending work
//   homogeneous_pd_round_robin  the same behind a load-blind round robin (a variant
//                        to show what load-awareness is worth, not a baseline)
//   kv_router            Dynamo/llm-d-style KV-aware router over the PD cluster:
//                        uncached tokens + load_weight x pending work + decode_weight
//                        x sequences decoding on the node
//   naive_heterogeneous  every prefill on the PrfaaS cluster
//   cache_aware_only     Mooncake-style: the prefill node with the best cache/load
//                        trade-off anywhere, no threshold

#include <cstdint>

#include "scheduler/policy.hpp"

namespace prfaas::serving {

/// Whether PrfaaS egress bandwidth is scarce, with hysteresis so it never flaps:
/// scarce once link utilisation reaches `scarce_utilisation` or the PrfaaS queue
/// reaches `scarce_queue_tokens`; abundant again only when both are back at or below
/// the `abundant_*` bounds.
class bandwidth_mode {
public:
  struct bounds {
    double scarce_utilisation = 0.85;
    double abundant_utilisation = 0.6;
    uint64_t scarce_queue_tokens = 512 * 1024;
    uint64_t abundant_queue_tokens = 128 * 1024;
  };

  explicit bandwidth_mode(bounds b) : b_(b) {}

  /// Feeds the current signals; returns true while scarce.
  bool update(double utilisation, uint64_t queue_tokens) {
    if (!scarce_ &&
        (utilisation >= b_.scarce_utilisation || queue_tokens >= b_.scarce_queue_tokens))
      scarce_ = true;
    else if (scarce_ && utilisation <= b_.abundant_utilisation &&
             queue_tokens <= b_.abundant_queue_tokens)
      scarce_ = false;
    return scarce_;
  }
  bool scarce() const { return scarce_; }
  const bounds& limits() const { return b_; }

private:
  bounds b_;
  bool scarce_ = false;
};

/// The best prefill worker of one side (PrfaaS or PD) for a request: the longest cached
/// prefix, minus a load penalty of `load_weight` tokens per pending token... expressed
/// as uncached tokens + load_weight × pending tokens, lowest wins. -1 if none is up.
int best_prefill(const cluster_view& v, const route_input& in, bool prfaas_side,
                 double load_weight);

/// Seconds until prefill worker `i` would have this prompt's KV at the decode side: the
/// work queued ahead of it and the prompt's uncached tokens at its measured pace (its
/// cluster's mean pace until it has its own); for a PrfaaS worker, the later of that and
/// the end of its KV transfer, which starts when the prefill starts and the link has
/// carried what is ahead (its backlog, and the KV of every prefill queued on the PrfaaS
/// side behind that link; with several links, the worker's own), at the link's free share of its
/// configured rate (or its measured throughput when no rate is configured). -1 when no pace is
/// known.
double expected_ready_seconds(const cluster_view& v, const route_input& in, size_t i);

/// The eligible prefill worker (PD, and PrfaaS if `allow_prfaas`; PrfaaS only if
/// `only_prfaas`) with the smallest expected_ready_seconds; -1 if none, or if a
/// candidate's cluster has no measured pace.
int fastest_prefill(const cluster_view& v, const route_input& in, bool allow_prfaas,
                    bool only_prfaas = false);

/// Spreads offloads over several links in proportion to their rates (`link_split:
/// rate`): fair queueing of KV bytes over the links. On each open link an offload would
/// start at the later of the link's tag and the last offload's start, and finish its KV
/// bytes over the link's rate after that; the link where it would finish first takes it,
/// and its tag moves to that finish. A link that was closed (down, over budget) starts no
/// earlier than the last offload, so it takes no catch-up burst when it opens, and keeps
/// what it carried before.
class link_splitter {
public:
  /// The PrfaaS cluster whose link the next offload of `kv_bytes` crosses, among the
  /// links of `v` with an eligible worker for `in`; "" if none. Charges that link.
  std::string pick(const cluster_view& v, const route_input& in, double kv_bytes);

private:
  std::map<std::string, double> tag_;
  double now_ = 0;
};

/// Where an offloaded prefill goes: with one link, `best_prefill` on the PrfaaS side;
/// with several, the open PrfaaS worker whose KV would be ready soonest over its own
/// link (so each link takes work in step with what it can carry), falling back to
/// `best_prefill` while a PrfaaS cluster has no measured pace. With a `split`, the link
/// is the splitter's and the worker the soonest ready of that link's cluster. -1 if none.
int offload_prefill(const cluster_view& v, const route_input& in, double load_weight,
                    link_splitter* split = nullptr);

} // namespace prfaas::serving

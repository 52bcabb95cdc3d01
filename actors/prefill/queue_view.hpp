#pragma once

// What the prefill queue (prefill_queue.hpp) sees of an order, and what a load report
// says of the queue: an order's work and its origin for fair queueing — the PD cluster
// it serves and that cluster's weight at this worker's cluster
// (deployment_config::fair_weight), where the deployment queues fairly.

#include <chrono>
#include <cstdint>
#include <string>

#include "prefill/prefill_queue.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas::serving {

struct fair_share {
  std::string cluster; ///< "" = first come first served (no fair queueing)
  double weight = 1;
};

/// The origin of an order whose KV goes to `decode_node`, at a worker of cluster `own`:
/// the decode node's PD cluster and its weight here under fair queueing; without it,
/// {"", 1}: every order has one origin.
inline fair_share fair_share_of(const deployment_config& dep, const std::string& own,
                                const std::string& decode_node) {
  const auto* n = dep.fair_queueing() ? dep.find_node(decode_node) : nullptr;
  return n == nullptr ? fair_share{} : fair_share{n->cluster, dep.fair_weight(own, n->cluster)};
}

/// The load an order adds: the tokens the scheduler expects it to compute (cached
/// prefixes are not work), or the whole prompt when the order does not say.
uint64_t work_of(const PrefillOrder& po);

/// The queue's view of an order arriving `now` at a worker of cluster `own`.
prefill_queue::order queue_order(const deployment_config& dep, const std::string& own,
                                 const PrefillOrder& po, prefill_queue::clock_type::time_point now,
                                 std::chrono::nanoseconds budget, bool pull_first);

/// The answer to a LoadQuery from a worker of cluster `own`: the queue's figures,
/// `starting` while the engine is not built, and under fair queueing the work ahead of
/// each PD cluster's next order.
WorkerLoad load_of(const prefill_queue& q, bool ready, const deployment_config& dep,
                   const std::string& own);

} // namespace prfaas::serving

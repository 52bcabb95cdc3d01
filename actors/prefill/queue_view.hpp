#pragma once

// What the prefill queue (prefill_queue.hpp) sees of an order, and what a load report
// says of the queue: an order's work and its origin for fair queueing — the PD cluster
// it serves and that cluster's share, where the deployment gives PD clusters shares.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "prefill/prefill_queue.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas::serving {

struct fair_share {
  std::string cluster; ///< "" = first come first served (no shares in the deployment)
  uint32_t weight = 1;
};

/// Some cluster sets a share: orders are queued by weighted fair queueing.
inline bool has_shares(const deployment_config& dep) {
  return std::any_of(dep.clusters.begin(), dep.clusters.end(),
                     [](auto& c) { return c.second.share > 0; });
}

/// Cluster `name` as an origin: its share (1 if it sets none).
inline fair_share share_of_cluster(const deployment_config& dep, const std::string& name) {
  auto it = dep.clusters.find(name);
  return {name, it == dep.clusters.end() ? 1 : std::max<uint32_t>(1, it->second.share)};
}

/// The PD cluster of `decode_node` (an order's KV goes there) and its
/// `clusters.<name>.share`, once any cluster sets a share (an unset one weighs 1);
/// without shares, {"", 1}: every order has one origin.
inline fair_share fair_share_of(const deployment_config& dep, const std::string& decode_node) {
  const auto* n = has_shares(dep) ? dep.find_node(decode_node) : nullptr;
  return n == nullptr ? fair_share{} : share_of_cluster(dep, n->cluster);
}

/// The load an order adds: the tokens the scheduler expects it to compute (cached
/// prefixes are not work), or the whole prompt when the order does not say.
uint64_t work_of(const PrefillOrder& po);

/// The queue's view of an order arriving `now`.
prefill_queue::order queue_order(const deployment_config& dep, const PrefillOrder& po,
                                 prefill_queue::clock_type::time_point now,
                                 std::chrono::nanoseconds budget, bool pull_first);

/// The answer to a LoadQuery: the queue's figures, `starting` while the engine is not
/// built, and under fair queueing the work ahead of each PD cluster's next order.
WorkerLoad load_of(const prefill_queue& q, bool ready, const deployment_config& dep);

} // namespace prfaas::serving

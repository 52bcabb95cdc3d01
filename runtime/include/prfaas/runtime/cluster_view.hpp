#pragma once

// The deployment as its nodes see it, gathered over their admin endpoints: each node's
// /health (its own state, incarnation, actors and how its failure detector sees the
// others) and, for the cluster page, its /overview (node_observer). One gathering feeds
// both `prfaas-node status` (a terminal table) and any node's /cluster (JSON for the
// page at /ui and for scripts).

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "prfaas/runtime/config.hpp"

namespace prfaas {

/// One node as the deployment sees it.
struct node_row {
  std::string node, cluster;
  /// up, suspect, down, "down?" (answers, but a peer declared it down: partitioned or
  /// fenced), escalated (its supervisor gave up on an actor), unknown / "not up" (no
  /// admin endpoint, only the peers can say).
  std::string state;
  std::string incarnation = "-";
  std::string seen;   ///< how the peers' failure detectors see it: "up 3/3", "-" if none
  std::string actors; ///< names, with (stopped) / (N restarts); or why no /health
  std::vector<std::string> roles; ///< actor types
  bool healthy = false;
};

struct cluster_gathering {
  std::vector<node_row> rows; ///< in the deployment's node order
  /// Each reachable node's /overview body (JSON text), when asked for.
  std::map<std::string, std::string> overviews;
  size_t healthy() const;
};

/// Asks every node with an admin endpoint, in parallel, each within `timeout`.
cluster_gathering gather_cluster(const deployment_config& dep, std::chrono::milliseconds timeout,
                                 bool with_overviews);

/// The /cluster body: nodes, links, schedulers (t and its history, the controller's
/// decisions), workers, routes, cache hit ratio, latency quantiles, recent requests.
std::string cluster_json(const deployment_config& dep, const cluster_gathering& g,
                         const std::string& served_by);

} // namespace prfaas

#pragma once

// `prfaas-sim run --gateway all`: the figures of each PD cluster (its gateway's clients)
// and of each single-link outage, from the run's per-request results.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/results.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::sim {

/// Per PD cluster: requests, failures, the route split, the clusters that ran the
/// prefills, TTFT. `cluster_of[i]` is request i's gateway's cluster.
nlohmann::json by_cluster(const std::vector<loadgen::request_result>& results,
                          const std::vector<std::string>& cluster_of, const deployment_config& dep);

/// Per `--link-down` naming one link: the requests that arrived at the PD cluster at its
/// end while it was down, how many were prefilled across it anyway, how many failed over
/// (routed across it before routing knew, then prefilled elsewhere), and when the last of
/// each arrived (seconds into the outage: how long routing took to learn of it).
nlohmann::json link_outages(const std::vector<loadgen::request_result>& results,
                            const std::vector<std::string>& cluster_of,
                            const deployment_config& dep,
                            const std::vector<std::string>& link_downs);

} // namespace prfaas::sim

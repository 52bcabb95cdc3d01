#pragma once

// `prfaas-node prometheus-config`: a Prometheus scrape configuration for every node of
// a deployment that has an admin endpoint (`admin: host:port`), so an operator points
// a Prometheus server at the whole deployment with one file.

#include <string>

#include "prfaas/runtime/config.hpp"

namespace prfaas::app {

/// The scrape configuration as YAML: one job for the deployment, one target per node
/// with an admin endpoint, labelled `prfaas_cluster` with the node's cluster. Nodes
/// without one, or whose port is 0 (chosen at start, not known here), are listed as
/// comments saying why they are not scraped. `interval` is Prometheus' duration syntax.
std::string prometheus_config(const deployment_config& dep, const std::string& interval);
/// Prints it to stdout; the exit code (0).
int print_prometheus_config(const deployment_config& dep, const std::string& interval);

} // namespace prfaas::app

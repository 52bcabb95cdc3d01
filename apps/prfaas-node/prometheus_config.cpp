#include "prometheus_config.hpp"

#include <iostream>
#include <sstream>

namespace prfaas::app {

namespace {

/// The port of `host:port` (the config parser has checked the form).
std::string port_of(const std::string& admin) {
  return admin.substr(admin.rfind(':') + 1);
}

/// A job name Prometheus accepts as a label value and a reader recognises.
std::string job_of(const std::string& deployment) {
  std::string out = "prfaas";
  if (!deployment.empty())
    out += "-" + deployment;
  return out;
}

} // namespace

std::string prometheus_config(const deployment_config& dep, const std::string& interval) {
  std::ostringstream y;
  y << "# Prometheus scrape configuration for prfaas deployment \"" << dep.name
    << "\" (prfaas-node prometheus-config)\n"
    << "global:\n"
    << "  scrape_interval: " << interval << "\n"
    << "scrape_configs:\n"
    << "  - job_name: \"" << job_of(dep.name) << "\"\n"
    << "    metrics_path: /metrics\n"
    << "    static_configs:\n";
  size_t targets = 0;
  for (auto& n : dep.nodes) {
    if (n.admin.empty()) {
      y << "      # node " << n.name << ": no admin endpoint, not scraped\n";
      continue;
    }
    if (port_of(n.admin) == "0") {
      y << "      # node " << n.name << ": admin port 0 is chosen at start, not scraped\n";
      continue;
    }
    y << "      - targets: [\"" << n.admin << "\"]\n"
      << "        labels: { prfaas_cluster: \"" << (n.cluster.empty() ? "none" : n.cluster)
      << "\" }\n";
    ++targets;
  }
  if (targets == 0)
    y << "      [] # no node of this deployment has a scrapable admin endpoint\n";
  return y.str();
}

int print_prometheus_config(const deployment_config& dep, const std::string& interval) {
  std::cout << prometheus_config(dep, interval);
  return 0;
}

} // namespace prfaas::app

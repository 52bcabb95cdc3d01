#pragma once

// The scheduler's cross-cluster links: which workers its PD cluster routes to, and the
// state of each link to a PrfaaS cluster as its link monitors report it.
//
// A deployment may hold several PD clusters (each with its own gateway and scheduler)
// and several PrfaaS clusters. A scheduler then routes to its own cluster's PD workers
// and to the PrfaaS clusters its cluster has a declared link to, each over that link:
// its state (up/down, utilisation, throughput, backlog) is tracked per link, and a
// report about a link of another PD cluster changes nothing here. With one PD cluster
// and one PrfaaS cluster (every deployment before several clusters existed) the view is
// the whole deployment and the single link's fields are set as they always were.

#include <map>
#include <set>
#include <string>

#include "prfaas/runtime/config.hpp"
#include "prfaas/wire/link.pb.h"
#include "scheduler/policy.hpp"

namespace prfaas::serving {

class link_book {
public:
  /// `own`: the scheduler's cluster. Narrows `v` (built from the whole deployment) to
  /// the workers this scheduler may route to, and gives it one link_view per PrfaaS
  /// cluster left in it.
  link_book(const deployment_config& dep, std::string own, cluster_view& v);

  /// A link monitor's report. Returns true when offload as a whole became possible or
  /// impossible (no link up before, one now, or the reverse).
  bool apply(const link::LinkState& st, cluster_view& v);

private:
  bool prfaas_cluster(const std::string& name) const;
  /// The report concerns a link of this scheduler's cluster.
  bool relevant(const link::LinkState& st) const;
  /// No relevant monitor reports the link between `prfaas` and this cluster down.
  bool pair_up(const std::string& prfaas) const;

  const deployment_config& dep_;
  std::string own_;
  bool several_pd_ = false;                  ///< the deployment has 2+ PD clusters
  std::set<std::string> down_;               ///< "cluster|peer" reported down
  std::map<std::string, double> last_queue_; ///< per PrfaaS cluster, last report's
};

} // namespace prfaas::serving

#pragma once

// The network a deployment runs on under `topology: netns`, derived from the deployment
// itself: every cluster is a "switch" namespace that routes, every node a namespace of
// its own with its own address, and every declared `links:` entry a veth pair between
// two switches with a `tc tbf` at the link's rate on both ends.
//
//   node ns (eth0 10.77.C.N/32) --veth-- switch ns of cluster C (10.77.C.254 on each
//   node port; routes 10.77.C.N/32 to its port) --veth lJ (10.78.J.1/24 .. .2/24,
//   tbf at the link's rate)-- switch ns of the other cluster
//
// Everything between two nodes — in one cluster or across a link — is routed by a
// switch (no bridge), so a switch's `inet forward` hook sees every packet of its
// cluster, and traffic between clusters with no declared link has no route at all.
// Plain data: the commands are run by topology.cpp and read by the unit tests.

#include <string>
#include <vector>

#include "prfaas/runtime/config.hpp"

namespace prfaas::chaos {

/// `argv` run inside namespace `ns` (itself when `ns` is empty): `nsenter --net`, which
/// enters the network namespace only. Not `ip netns exec`: that also gives the command a
/// private mount namespace with the namespace's own /sys, and the umount of /sys waits
/// for an RCU grace period (`synchronize_rcu_expedited` in `namespace_unlock`), which on
/// a loaded two-vCPU VM took seconds (once over 10 s): faults came late and undid early.
/// Nothing run here (nft, tc, ip, sysctl on /proc/sys/net, prfaas-node) reads /sys.
std::vector<std::string> in_netns(const std::string& ns, std::vector<std::string> argv);

struct planned_node {
  std::string name, cluster;
  std::string ns;              ///< its own namespace
  std::string ip;              ///< its address (all its endpoints use it)
  std::string switch_ns, port; ///< its cluster's switch namespace and the port it hangs on
};

struct planned_cluster {
  std::string name, ns; ///< the switch namespace
  std::string subnet;   ///< 10.77.C.0/24
};

struct planned_link {
  std::string a, b;       ///< cluster names, as declared
  std::string ns_a, ns_b; ///< their switch namespaces
  std::string dev;        ///< the veth end's name (the same in both namespaces)
  std::string rate;       ///< tbf rate, e.g. "1000000000bit"
  /// Re-installs the routes over this link: taking `dev` down deletes the routes
  /// through it, and bringing it up does not bring them back.
  std::vector<std::vector<std::string>> routes;
};

struct netns_plan {
  std::vector<planned_cluster> clusters;
  std::vector<planned_node> nodes; ///< deployment order
  std::vector<planned_link> links; ///< declaration order
  /// Shell-free commands that build it, in order (the first is `ip netns add`).
  std::vector<std::vector<std::string>> setup;
  /// Every namespace it creates: nodes first, then switches (teardown order).
  std::vector<std::string> namespaces;

  const planned_node& node(const std::string& name) const;
  const planned_cluster& cluster(const std::string& name) const;
  /// The link between two clusters (either order), or null.
  const planned_link* link_between(const std::string& a, const std::string& b) const;
};

/// Plans the network for `d`. `tag` makes the names unique on the machine (e.g. the
/// pid). `track` (where nft is installed): every switch tracks connections from their
/// first packet (a `ct state new` counter in its forward hook), so a later one-way
/// blackhole's `ct direction` is the connection's true direction — conntrack would
/// otherwise pick an established connection up mid-stream from whichever packet it saw
/// first, and could take the reply side for the original. Throws std::runtime_error for
/// what it cannot place (a node without a cluster, more than 250 nodes in a cluster or
/// 250 clusters or links).
netns_plan plan_netns(const deployment_config& d, const std::string& tag, bool track = false);

/// The deployment file `yaml_text` (read from `source`) with every node's control,
/// data and admin endpoint and every actor's `listen` on that node's planned address
/// (ports kept), and plugin paths made absolute.
std::string place_deployment(const std::string& yaml_text, const std::string& source,
                             const netns_plan& plan);

} // namespace prfaas::chaos

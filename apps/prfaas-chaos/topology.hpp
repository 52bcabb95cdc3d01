#pragma once

// Where a scenario's deployment runs and its node processes. `netns`: the network
// derived from the deployment (netns_plan.hpp): a namespace per node with its own
// address, a routing "switch" namespace per cluster, a tbf-limited veth pair per
// declared link; `loopback`: every node on 127.0.0.1 in one private namespace (so fixed
// ports never clash with other deployments on the machine), or in ours where the
// kernel refuses namespaces. Each node is its own process, started, killed, paused and
// restarted from here; the namespace of each is known so that commands and probes run
// beside it.

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "prfaas/runtime/config.hpp"
#include "netns_plan.hpp"
#include "scenario.hpp"
#include "common/process.hpp"

namespace prfaas::chaos {

/// The scenario cannot run here (namespaces or nft refused and no fallback).
class skipped : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Where the tools and binaries are.
struct environment {
  std::filesystem::path repo; ///< tools/netns-two-dc.sh lives here; relative paths resolve here
  std::filesystem::path bin;  ///< prfaas-node, prfaas-bench
  std::filesystem::path work; ///< logs and results
};

/// One node's whereabouts. `ns` empty: our own namespace.
struct node_place {
  std::string name;
  std::string ns;
  std::string ip; ///< the host of its endpoints
  int control_port = 0, data_port = 0, admin_port = 0;
};

/// A declared link between two clusters (netns only): the veth `dev` in each switch.
using link_place = planned_link;

/// Kills every process inside the namespaces live topologies made and removes those
/// namespaces: for an interrupted run (SIGINT, SIGTERM), whose destructors never run.
/// Safe to call from any thread.
void emergency_teardown();

class topology {
public:
  /// Sets up the namespaces (or falls back / throws skipped as the scenario says) and
  /// loads the deployment as it will run. Starts no node.
  topology(const scenario& s, const environment& env);
  /// Stops every node (SIGTERM, then SIGKILL) and removes the namespaces.
  ~topology();
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  topology_kind kind() const { return kind_; }
  /// Why the scenario's topology was not used, when it fell back; empty otherwise.
  const std::string& fallback_reason() const { return fallback_reason_; }
  const deployment_config& deployment() const { return deployment_; }
  const std::vector<std::string>& nodes() const { return names_; }
  const node_place& place(const std::string& node) const { return places_.at(node); }
  /// The declared links (netns only; empty on loopback).
  const std::vector<link_place>& links() const { return plan_.links; }
  /// The link a `rate` or `link_down` fault acts on: the one it names, or the only one.
  /// Null when there is none; throws std::runtime_error when it is ambiguous or unknown.
  const link_place* link_for(const fault_spec& f) const;
  /// The switch namespace of `node`'s cluster (netns only; empty on loopback).
  std::string switch_of(const std::string& node) const;
  /// True when faults may install nft rules here: a namespace of our own, never the
  /// machine's (other deployments share its loopback).
  bool private_network() const;

  struct gateway_place {
    std::string node, listen, ns; ///< listen: host:port of its HTTP API
  };
  /// The (first) gateway; throws when the deployment has none.
  gateway_place gateway() const;
  /// The nodes that run a scheduler (they publish prfaas_scheduler_* gauges).
  std::vector<std::string> scheduler_nodes() const;

  void start(const std::string& node);
  void start_all();
  /// True once every node's /health answers and lists all its peers up, within `limit`.
  bool wait_healthy(std::chrono::milliseconds limit, std::string& why);
  bool running(const std::string& node);
  /// The nodes that ended without being killed by a fault, with their exit codes
  /// (128 + signal when a signal ended them).
  std::map<std::string, int> unexpected_exits();
  void signal(const std::string& node, int sig);
  /// SIGKILL and reap.
  void kill(const std::string& node);
  std::filesystem::path log_of(const std::string& node) const;

  /// Runs `argv` in namespace `ns` (in_netns), bounded by `command_limit`; its output in
  /// `out`. A command slower than a second is reported on stderr: the fault it serves
  /// came that much late.
  bool run_in(const std::string& ns, std::vector<std::string> argv, std::string& out) const;
  /// Runs `argv` in `ns`, bounded; true with its standard output alone in `out` (for
  /// tools that print JSON), false with the command and everything it said.
  bool query_in(const std::string& ns, std::vector<std::string> argv, std::string& out) const;
  /// How long a fault or setup command may take before it is killed and counted failed:
  /// the kernel's own work (a veth going down waits for an RCU grace period under the
  /// RTNL lock) has taken seconds on a loaded two-vCPU VM.
  static constexpr std::chrono::seconds command_limit{30};
  /// argv prefixed to run in `ns`.
  std::vector<std::string> in_ns(const std::string& ns, std::vector<std::string> argv) const;

private:
  /// False when namespaces are refused and the scenario falls back to loopback.
  bool setup_netns(const scenario& s);
  bool setup_loopback();
  void place_nodes(const std::map<std::string, std::string>& ns_of);
  /// Removes the namespaces this topology made (netns and loopback alike).
  void remove_namespaces();

  environment env_;
  topology_kind kind_;
  std::string fallback_reason_;
  std::filesystem::path config_file_;
  deployment_config deployment_;
  std::vector<std::string> names_;
  std::map<std::string, node_place> places_;
  netns_plan plan_;        ///< netns: what was built (removed in the destructor)
  std::string private_ns_; ///< loopback's own namespace
  std::map<std::string, std::unique_ptr<proc::child_process>> procs_;
  std::map<std::string, bool> killed_; ///< down by a kill fault, not restarted yet
};

} // namespace prfaas::chaos

#pragma once

// One node of a deployment: its transport (wire + messenger + transport actor), its
// supervisor with the configured actors, and its admin endpoint (/metrics, /health).
// Start and stop are symmetric: stop runs in reverse order and is idempotent.
//
// The same class runs live (ZeroMQ, real time) and in simulation (sim_network,
// CAF's test coordinator): only `node_options::sim` differs.

#include <atomic>
#include <map>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/node_context.hpp"
#include "prfaas/runtime/security.hpp"
#include "prfaas/runtime/sim_network.hpp"

namespace zmq {
class context_t;
}

namespace httplib {
class Server;
}

namespace prfaas {

class node_observer;

struct node_options {
  sim_network_ptr sim;           ///< simulated network; null = ZeroMQ
  zmq::context_t* zmq = nullptr; ///< shared ZeroMQ context (required without sim)
  uint64_t incarnation = 0;      ///< 0 = wall-clock nanoseconds at start
  logger_ptr log;                ///< default: a stderr logger at the configured level
  bool serve_admin = true;       ///< start the /metrics + /health endpoint if configured
  /// Chaos testing only: the admin endpoint also takes `PUT /faults/<point>` (body: the
  /// probability), so a harness can switch fault points on and off while the node runs.
  bool live_faults = false;
  std::string control_override; ///< bind here instead of the configured endpoint (tests)
  std::string data_override;    ///< the same for the data endpoint
  /// Data endpoints of peers, overriding the configured ones (tests binding `tcp://...:*`).
  std::map<std::string, std::string> peer_data_endpoints;
};

class node {
public:
  node(caf::actor_system& sys, const deployment_config& dep, const std::string& name,
       const actor_registry& reg, node_options opts);
  ~node();

  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Binds, starts the transport, the admin endpoint and every configured actor.
  /// Throws std::runtime_error (with the endpoint) when binding fails.
  void start();

  /// Stops actors (reverse order), admin endpoint, transport. Idempotent. Live
  /// nodes wait for each actor to finish; simulated ones leave that to the scheduler.
  void stop();

  /// True once the supervisor gave up (restart intensity exceeded).
  bool escalated() const { return escalated_->flag.load(); }
  std::string escalation_reason() const;
  /// Blocks until escalation or `timeout`; true on escalation.
  bool wait_escalation(std::chrono::milliseconds timeout) const;

  node_context& context() { return *ctx_; }
  const std::string& name() const { return cfg_.name; }
  uint64_t incarnation() const { return incarnation_; }
  caf::actor supervisor() const { return supervisor_; }
  transport_actor transport() const { return transport_; }
  std::shared_ptr<metrics> node_metrics() const { return metrics_; }
  /// The node's fault points (faults.hpp): off unless the deployment's `faults:`
  /// turns them on; a chaos driver may change them while the node runs.
  fault_points& faults() { return *faults_; }
  /// The endpoint actually bound (resolves `tcp://host:*`).
  std::string control_endpoint() const;
  /// The data endpoint actually bound; empty when the node has no data plane.
  std::string data_endpoint() const;
  /// Port of the admin endpoint; 0 when none.
  int admin_port() const { return admin_port_; }

private:
  struct escalation {
    std::atomic<bool> flag{false};
    mutable std::mutex mtx;
    mutable std::condition_variable cv;
    std::string reason;
  };

  /// PUT /faults/<point> (node_options::live_faults): sets `point` to the probability in
  /// `body`; the answer's text ("ok fired=N": how often it fired so far in this node),
  /// with `status` 200, 400 (not a probability) or 404.
  std::string set_live_fault(const std::string& point, const std::string& body, int& status);
  void start_admin();
  /// /overview, /cluster and the page at /ui (with the observer that feeds them).
  void install_cluster_page();
  void start_data_plane();
  /// The control wire: the simulated network's, or a ZeroMQ one bound to the control
  /// endpoint that reaches every node of `endpoints`.
  void start_wire(const std::map<std::string, std::string>& endpoints);
  /// The node's actors under its supervisor, which escalates to the node.
  void start_actors();
  data_plane_ptr attach_sim_data_plane(data_plane_config dc);
  std::string health_json();

  caf::actor_system& sys_;
  const deployment_config& dep_;
  const node_config& cfg_;
  const actor_registry& reg_;
  node_options opts_;
  uint64_t incarnation_;
  logger_ptr log_;
  std::shared_ptr<metrics> metrics_;
  std::shared_ptr<messenger> messenger_;
  std::shared_ptr<fault_points> faults_;
  security_ptr security_; ///< null when the deployment has no `security:` section
  wire_ptr wire_;
  data_plane_ptr data_;
  transport_actor transport_;
  std::shared_ptr<node_context> ctx_;
  caf::actor supervisor_;
  std::shared_ptr<escalation> escalated_ = std::make_shared<escalation>();
  std::unique_ptr<httplib::Server> admin_;
  std::unique_ptr<node_observer> observer_; ///< with the admin endpoint: /overview, /cluster
  std::thread admin_thread_;
  int admin_port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

} // namespace prfaas

#pragma once

// A whole deployment in virtual time: every node of a deployment file, with the real
// actors, on CAF's test coordinator, joined by the simulated network and data plane.
// One thread; nothing reads the wall clock, so a run is a function of the deployment
// and the driver's inputs alone.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"
#include "prfaas/runtime/sim_network.hpp"
#include "prfaas/runtime/sim_time.hpp"

namespace prfaas::sim {

class sim_world {
public:
  using time_point = sim_timer::time_point;

  /// Parses and validates the deployment (config_error names the key).
  explicit sim_world(const std::string& deployment_file);
  /// A parsed deployment, validated against `registry` (the actor types it may start).
  sim_world(deployment_config dep, actor_registry registry);
  ~sim_world();
  sim_world(const sim_world&) = delete;
  sim_world& operator=(const sim_world&) = delete;

  /// Nodes started from now on log at `level` to stderr, each line stamped with virtual
  /// seconds since start() (`t=12.345`) instead of the wall clock; by default they
  /// log nothing (a sweep of many seeds would print millions of lines).
  void set_log_level(log_level level) { log_level_ = level; }
  /// Starts every node (deterministic incarnations 1, 2, ... in file order).
  void start();
  /// Starts node `name` alone, as `incarnation` (0: the next unused number; a restart
  /// must use a higher one than the node had), and runs what became runnable.
  node& start_node(const std::string& name, uint64_t incarnation = 0);
  /// Crashes node `name` the way it looks from outside: it stops at once and vanishes
  /// from the network (its actors end, its transfers stall and time out elsewhere).
  void crash(const std::string& name);
  /// Starts a crashed node again as a new incarnation (the next unused number).
  void restart(const std::string& name);
  /// False between crash() and restart().
  bool running(const std::string& name) const { return nodes_.count(name) > 0; }
  /// Runs the simulation until `stop()` holds, virtual time passes `until`, or
  /// nothing is left to happen. Returns false when it stopped for lack of events.
  bool run_until(time_point until, const std::function<bool()>& stop = {});
  /// Runs every runnable job without advancing time.
  void run();
  /// Advances virtual time by `d`, firing every timer and event due on the way in
  /// order; the clock then reads now() + d even when nothing was due.
  void advance(std::chrono::nanoseconds d);
  /// Fires what is pending until nothing is (bounded: for teardown and for tests that
  /// need every timer to have run).
  void drain();

  time_point now() const;
  /// Virtual seconds since start().
  double elapsed_s() const;
  caf::actor_system& system() { return *sys_; }
  caf::scheduler::test_coordinator& sched() { return *sched_; }
  const deployment_config& deployment() const { return dep_; }
  const actor_registry& registry() const { return registry_; }
  sim_network& net() { return *net_; }
  sim_data_fabric& fabric() { return *net_->data_fabric(); }
  sim_timer& timer() { return *timer_; }
  node& at(const std::string& name) { return *nodes_.at(name); }
  const std::map<std::string, std::unique_ptr<node>>& nodes() const { return nodes_; }
  /// Timer and delivery events fired so far (the simulation's unit of work): CAF's
  /// timeouts and the callbacks of the simulation's own queue.
  uint64_t events() const { return events_; }

private:
  void init();
  /// Fires the earliest pending event, CAF's timeouts first at equal instants; false
  /// when none is pending. Never moves the clock past `until`.
  bool step(time_point until);

  caf::actor_system_config cfg_;
  /// sim_timer callbacks (engine effects, data-plane drains), run by run_until.
  sim_event_queue queue_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  sim_network_ptr net_;
  deployment_config dep_;
  actor_registry registry_;
  std::map<std::string, std::unique_ptr<node>> nodes_;
  /// Crashed nodes: their actors may still hold their context until they end.
  std::vector<std::unique_ptr<node>> crashed_;
  uint64_t last_incarnation_ = 0;
  std::unique_ptr<sim_timer> timer_;
  time_point started_{};
  uint64_t events_ = 0;
  log_level log_level_ = log_level::off;
};

} // namespace prfaas::sim

#pragma once

// The simulated network: an in-process wire driven by the actor clock. Frames are
// delivered as delayed messages, so under CAF's test coordinator delivery happens
// in virtual time, in a deterministic order. Per-pair latency, one-way and two-way
// partitions and crashed (detached) nodes are supported. Bulk KV transfers run on the
// simulated data plane (sim_data_plane.hpp), which shares this network's latency and
// reachability and is reached through data_fabric().

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "prfaas/runtime/wire.hpp"

namespace prfaas {

class sim_data_fabric;

class sim_network : public std::enable_shared_from_this<sim_network> {
public:
  explicit sim_network(caf::actor_system& sys,
                       std::chrono::nanoseconds default_latency = std::chrono::milliseconds(1));
  ~sim_network();

  /// The wire of node `name`. Delivery to it starts when the wire is started.
  wire_ptr attach(const std::string& name);

  void set_latency(const std::string& a, const std::string& b, std::chrono::nanoseconds d);
  /// Drops everything sent from `from` to `to` (one way) until healed.
  void block(const std::string& from, const std::string& to);
  void unblock(const std::string& from, const std::string& to);
  /// Two-way partition between the two sides.
  void partition(const std::string& a, const std::string& b);
  void heal(const std::string& a, const std::string& b);
  /// Drops everything to and from `node` (a crashed or paused process).
  void isolate(const std::string& node);
  void rejoin(const std::string& node);

  std::chrono::nanoseconds latency(const std::string& a, const std::string& b) const;
  /// False while `from → to` is blocked or either side is isolated.
  bool reachable(const std::string& from, const std::string& to) const;
  /// Called after every block/unblock/isolate/rejoin (the data plane re-plans its links).
  void on_change(std::function<void()> fn);

  /// The simulated data plane of this network (created on first use; lives as long).
  std::shared_ptr<sim_data_fabric> data_fabric();

  uint64_t delivered() const;
  uint64_t dropped() const;

  /// Called by a sim wire; thread-safe.
  send_status route(const std::string& from, const std::string& to, std::string header,
                    bulk_ptr bulk);
  void set_endpoint(const std::string& name, caf::actor endpoint);
  void clear_endpoint(const std::string& name, const caf::actor& endpoint);

private:
  caf::actor_system& sys_;
  std::chrono::nanoseconds default_latency_;
  mutable std::mutex mtx_;
  std::map<std::string, caf::actor> endpoints_;
  std::map<std::pair<std::string, std::string>, std::chrono::nanoseconds> latency_;
  std::set<std::pair<std::string, std::string>> blocked_;
  std::set<std::string> isolated_;
  /// Nothing blocked and nobody isolated (the common case): reachable() answers
  /// without the lock or the string lookups, which the data plane asks per transfer.
  std::atomic<bool> all_reachable_{true};
  uint64_t delivered_ = 0;
  uint64_t dropped_ = 0;
  std::vector<std::function<void()>> listeners_;
  std::shared_ptr<sim_data_fabric> fabric_;
  void changed();
};

using sim_network_ptr = std::shared_ptr<sim_network>;

} // namespace prfaas

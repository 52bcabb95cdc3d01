#pragma once

// What an actor gets from the node it runs on: identity, settings, the transport,
// metrics, a logger and its own seed. Shared by all actors of one node; outlives them.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <caf/actor_system.hpp>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/messenger.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/runtime/transport.hpp"

namespace prfaas {

class node_context {
public:
  node_context(caf::actor_system& sys, const deployment_config& dep, const node_config& node,
               uint64_t incarnation, std::shared_ptr<messenger> m, transport_actor transport,
               std::shared_ptr<metrics> metrics, logger_ptr log);

  caf::actor_system& system() const { return sys_; }
  const std::string& node() const { return node_.name; }
  const std::string& cluster() const { return node_.cluster; }
  uint64_t incarnation() const { return incarnation_; }
  const deployment_config& deployment() const { return dep_; }
  const node_config& config() const { return node_; }

  transport_actor transport() const { return transport_; }
  messenger& msgr() const { return *messenger_; }
  metrics& node_metrics() const { return *metrics_; }
  const logger_ptr& log() const { return log_; }

  /// The node's KV data plane; null when the node has none (no `data` endpoint, or a
  /// simulated node without one).
  data_plane* data() const { return data_.get(); }
  void set_data_plane(data_plane_ptr dp) { data_ = std::move(dp); }

  /// The node's fault points (faults.hpp); never fire unless configured.
  fault_points& faults() const { return *faults_; }
  void set_faults(std::shared_ptr<fault_points> f) { faults_ = std::move(f); }
  /// One pass through a rare path (probes.hpp).
  void probe(std::string_view name) const { probe_hit(*metrics_, name); }

  /// Address of a local actor.
  address local(const std::string& actor) const { return {node_.name, actor}; }

  /// A seed for `actor_name` derived from the deployment seed and the node name:
  /// stable across runs (so a simulation replays) and distinct per actor.
  uint64_t seed_for(const std::string& actor_name) const;

  /// An id for something that crosses nodes (a KV transfer): no other node hands it out,
  /// nor this node in another life while this one's can still be in use. Its bits: the
  /// node's index in the deployment (16), its incarnation's milliseconds modulo 2^16 (16:
  /// a later life reuses these ids only 65 s on, after every transfer of this one timed
  /// out), a counter (32). Generated, never a hash: equal ids mean the same thing.
  uint64_t new_id();

private:
  caf::actor_system& sys_;
  const deployment_config& dep_;
  const node_config& node_;
  uint64_t incarnation_;
  std::shared_ptr<messenger> messenger_;
  transport_actor transport_;
  std::shared_ptr<metrics> metrics_;
  logger_ptr log_;
  data_plane_ptr data_;
  std::shared_ptr<fault_points> faults_ = std::make_shared<fault_points>();
  uint64_t id_prefix_ = 0;
  std::atomic<uint32_t> next_id_{1};
};

using node_context_ptr = std::shared_ptr<node_context>;

} // namespace prfaas

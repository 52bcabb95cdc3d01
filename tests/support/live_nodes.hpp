#pragma once

// Live nodes in the test's own process, on real ZeroMQ sockets: one CAF system
// configured as prfaas-node configures it, one ZeroMQ context, null logs. Members are
// destroyed in reverse: nodes first, then the context and the actor system.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <zmq.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/actor_system.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/node.hpp"

namespace prfaas::test {

/// One `nodes:` entry on loopback: name, control and data ports, then `extra` lines
/// (already indented, e.g. "    actors: [ ... ]\n").
inline std::string node_entry(const std::string& name, uint16_t control, uint16_t data,
                              const std::string& extra = "") {
  return "  - name: " + name +
         "\n"
         "    control: tcp://127.0.0.1:" +
         std::to_string(control) +
         "\n"
         "    data: tcp://127.0.0.1:" +
         std::to_string(data) + "\n" + extra;
}

class live_nodes {
public:
  explicit live_nodes(actor_registry registry = actor_registry::with_builtins())
      : registry_(std::move(registry)), sys_(configured(cfg_)) {
    opts_.zmq = &zctx_;
    opts_.log = make_null_logger();
  }

  /// Creates and starts node `name` of `dep`; it lives as long as this object.
  node& start(const deployment_config& dep, const std::string& name) {
    nodes_.push_back(std::make_unique<node>(sys_, dep, name, registry_, opts_));
    nodes_.back()->start();
    return *nodes_.back();
  }

  caf::actor_system& system() { return sys_; }
  zmq::context_t& zmq() { return zctx_; }

private:
  static caf::actor_system_config& configured(caf::actor_system_config& cfg) {
    configure_actor_system(cfg);
    return cfg;
  }

  actor_registry registry_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  zmq::context_t zctx_{1};
  node_options opts_;
  std::vector<std::unique_ptr<node>> nodes_;
};

} // namespace prfaas::test

#pragma once

// Deterministic harness for tests: the simulation library's world (prfaas/sim/sim_world.hpp,
// the same one prfaas-sim runs) built from a deployment given as YAML text, plus what
// only tests need: a request started from a node as an actor there would, and a peek
// at an actor's state. Same-instant events are ordered as in prfaas-sim.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/sim/sim_world.hpp"

namespace prfaas::test {

class sim_fixture : public sim::sim_world {
public:
  using clock_type = std::chrono::steady_clock;

  explicit sim_fixture(const std::string& yaml,
                       actor_registry registry = actor_registry::with_builtins())
      : sim_world(parse_deployment(yaml, "<test>"), std::move(registry)) {}

  /// Starts node `name` (incarnation 0: the next unused number; a restart after a
  /// crash passes a higher one to be explicit).
  node& start(const std::string& name, uint64_t incarnation = 0) {
    return start_node(name, incarnation);
  }

  /// Starts a request from node `from` (as an actor there would, with
  /// request_remote); the outcome fills in as virtual time passes.
  struct outcome {
    bool done = false;
    std::optional<remote_message> reply;
    caf::error error;
  };
  std::shared_ptr<outcome> request(const std::string& from, remote_message msg,
                                   std::chrono::nanoseconds timeout) {
    auto out = std::make_shared<outcome>();
    auto* ctx = &at(from).context();
    system().spawn([out, ctx, msg, timeout](caf::event_based_actor* self) mutable {
      request_remote(self, *ctx, std::move(msg), timeout)
          .then(
              [out, self](remote_message& r) {
                out->done = true;
                out->reply = std::move(r);
                self->quit();
              },
              [out, self](caf::error& e) {
                out->done = true;
                out->error = std::move(e);
                self->quit();
              });
    });
    run();
    return out;
  }
};

/// Peeks at a stateful actor's state (test coordinator only: nothing runs concurrently).
template <class State, class Base = caf::event_based_actor, class Handle>
State& state_of(const Handle& h) {
  return dynamic_cast<caf::stateful_actor<State, Base>&>(*caf::actor_cast<caf::abstract_actor*>(h))
      .state;
}

} // namespace prfaas::test

#pragma once

// Deterministic harness: real nodes (transport, supervisor, actors) on CAF's test
// coordinator with a virtual clock, joined by the simulated network. It drives the
// test_coordinator directly (scheduler.policy "testing"), not through CAF's test DSL;
// teardown stops every node and drains the scheduler so ~actor_system never waits on
// re-arming timers (an actor that re-arms its own delayed_send would keep it alive).

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <caf/detail/test_actor_clock.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/runtime/sim_network.hpp"

namespace prfaas::test {

namespace detail {

/// Reads the clock's schedule through a member pointer taken in a derived class:
/// the next due time tells how far virtual time can jump.
struct clock_peek : caf::detail::test_actor_clock {
  static auto schedule_ptr() { return &clock_peek::schedule_; }
};

} // namespace detail

class sim_fixture {
public:
  using clock_type = std::chrono::steady_clock;

  explicit sim_fixture(const std::string& yaml,
                       actor_registry registry = actor_registry::with_builtins())
      : registry_(std::move(registry)) {
    cfg_.set("scheduler.policy", caf::atom("testing"));
    cfg_.add_message_types<caf::id_block::prfaas>();
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
    net_ = std::make_shared<sim_network>(*sys_);
    dep_ = parse_deployment(yaml, "<test>");
    registry_.validate(dep_);
  }

  ~sim_fixture() {
    for (auto& [_, n] : nodes_)
      n->stop();
    drain();
    nodes_.clear();
    drain();
  }

  /// Starts node `name` with an explicit incarnation (restarts use a higher one).
  node& start(const std::string& name, uint64_t incarnation = 0) {
    if (incarnation == 0)
      incarnation = ++last_incarnation_;
    last_incarnation_ = std::max(last_incarnation_, incarnation);
    node_options opts;
    opts.sim = net_;
    opts.incarnation = incarnation;
    opts.log = make_null_logger();
    opts.serve_admin = false;
    auto n = std::make_unique<node>(*sys_, dep_, name, registry_, opts);
    n->start();
    auto& ref = *n;
    nodes_[name] = std::move(n);
    run();
    return ref;
  }

  /// Stops a node the way a crash looks from outside: it vanishes from the network.
  void crash(const std::string& name) {
    auto i = nodes_.find(name);
    if (i == nodes_.end())
      return;
    i->second->stop();
    run();
    graveyard_.push_back(std::move(i->second));
    nodes_.erase(i);
  }

  node& at(const std::string& name) { return *nodes_.at(name); }

  /// Runs every runnable job without advancing time.
  void run() { sched_->run(); }

  /// Advances virtual time by `d`, firing every timer and delivery due on the way,
  /// in order.
  void advance(std::chrono::nanoseconds d) {
    auto& clock = sched_->clock();
    auto target = clock.current_time + d;
    run();
    auto& schedule = clock.*detail::clock_peek::schedule_ptr();
    while (!schedule.empty() && schedule.begin()->first <= target) {
      clock.trigger_timeout();
      run();
    }
    if (clock.current_time < target)
      clock.current_time = target;
    run();
  }

  /// Fires every pending timer until none is left (bounded, for teardown).
  void drain() {
    for (int i = 0; i < 100000 && (sched_->has_job() || sched_->has_pending_timeout()); ++i) {
      sched_->run();
      if (sched_->has_pending_timeout())
        sched_->trigger_timeout();
    }
    sched_->run();
  }

  clock_type::time_point now() const { return sched_->clock().current_time; }

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
    auto client = sys_->spawn([out, ctx, msg, timeout](caf::event_based_actor* self) mutable {
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

  caf::actor_system& system() { return *sys_; }
  caf::scheduler::test_coordinator& sched() { return *sched_; }
  sim_network& net() { return *net_; }
  const deployment_config& deployment() const { return dep_; }

private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  sim_network_ptr net_;
  deployment_config dep_;
  actor_registry registry_;
  std::map<std::string, std::unique_ptr<node>> nodes_;
  std::vector<std::unique_ptr<node>> graveyard_;
  uint64_t last_incarnation_ = 0;
};

/// Peeks at a stateful actor's state (test coordinator only: nothing runs concurrently).
template <class State, class Base = caf::event_based_actor, class Handle>
State& state_of(const Handle& h) {
  return dynamic_cast<caf::stateful_actor<State, Base>&>(*caf::actor_cast<caf::abstract_actor*>(h))
      .state;
}

} // namespace prfaas::test

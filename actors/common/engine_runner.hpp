#pragma once

// Where an engine instance runs. Engines are synchronous and not thread-safe
// (engine.hpp); a prefill can take seconds.
//
// Live (real time): the engine has a thread of its own, which also builds it (loading a
// real model takes seconds; on an actor's thread it would stall the node's scheduler,
// its heartbeats among them). Workers stay responsive (load queries, cancels, new
// orders) by handing every engine call to that thread and receiving the outcome back
// through their actor_inbox; their first job tells them the engine is ready.
//
// Simulated (virtual time, CAF's test coordinator; prfaas/runtime/sim_time.hpp): the
// engine runs on a manual clock. A job runs at once on the caller's thread, but as if
// it had started when the engine is next free (busy-until) and taken the modeled
// time its engine spent: everything it does — inbox posts, data-plane pushes — is
// deferred to the virtual instant the engine's clock had reached at that point. A
// layer-wise prefill therefore streams its chunks over its modeled duration, and the
// worker hears of the result exactly when a real engine would have finished.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>

#include "common/actor_inbox.hpp"
#include "prfaas/engine/engine.hpp"
#include "prfaas/runtime/sim_time.hpp"

namespace prfaas::serving {

class engine_runner {
public:
  using job = std::function<void(engine::engine&)>;
  using time_point = std::chrono::steady_clock::time_point;
  /// Builds the engine on the clock it is to spend its modeled time on. Live, it runs
  /// on the engine's thread: it must own what it captures.
  using engine_factory = std::function<std::unique_ptr<engine::engine>(engine::clock&)>;
  /// Told (on the engine's thread) why the engine could not be built; no job runs then.
  using failure_handler = std::function<void(const std::string&)>;

  /// Virtual time when `sys` runs on the test coordinator (the engine is built here and
  /// now), else a thread named `name` (visible in top/perf) that builds the engine on
  /// the wall clock and then runs the jobs posted meanwhile.
  engine_runner(caf::actor_system& sys, engine_factory make, const std::string& name,
                failure_handler on_failure = {});
  ~engine_runner();

  engine_runner(const engine_runner&) = delete;
  engine_runner& operator=(const engine_runner&) = delete;

  /// Queues a job; jobs run one at a time, in order.
  void post(job j);
  /// Runs `ready` in the worker's context (through `inbox`) once the engine is built:
  /// at once in a simulation, after the build live (then info() may be read too).
  void when_ready(const std::shared_ptr<actor_inbox>& inbox,
                  std::function<void(const engine::model_info&)> ready);
  /// A failure handler that makes the worker actor fail (its supervisor restarts it, or
  /// escalates a crash loop) with the reason the engine could not be built.
  static failure_handler crash(const std::shared_ptr<actor_inbox>& inbox);
  /// Drops jobs not yet started, waits for the running one, joins. Idempotent.
  void stop();
  /// Jobs queued or running.
  size_t pending() const;
  /// The engine's description. Live, only once a job has run (the engine is built).
  const engine::model_info& info() const { return engine_->info(); }
  /// Inside a job: the time the job has reached (steady clock live; the actor
  /// clock's virtual time in simulation, including what the engine spent so far).
  time_point now() const;
  bool simulated() const { return virtual_ != nullptr; }

private:
  struct virtual_mode;
  void run(const engine_factory& make, const failure_handler& on_failure);
  void run_virtual(job& j);

  std::unique_ptr<engine::real_clock> wall_;
  std::unique_ptr<virtual_mode> virtual_;
  std::unique_ptr<engine::engine> engine_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<job> jobs_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace prfaas::serving

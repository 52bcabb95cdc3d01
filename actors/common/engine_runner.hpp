#pragma once

// Where an engine instance runs. Engines are synchronous and not thread-safe
// (engine.hpp); a prefill can take seconds.
//
// Live (real time): the engine has a thread of its own. Workers stay responsive (load
// queries, cancels, new orders) by handing every engine call to that thread and
// receiving the outcome back through their actor_inbox.
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

#include "prfaas/engine/engine.hpp"
#include "prfaas/runtime/sim_time.hpp"

namespace prfaas::serving {

class engine_runner {
public:
  using job = std::function<void(engine::engine&)>;
  using time_point = std::chrono::steady_clock::time_point;
  /// Builds the engine on the clock it is to spend its modeled time on.
  using engine_factory = std::function<std::unique_ptr<engine::engine>(engine::clock&)>;

  /// Virtual time when `sys` runs on the test coordinator, else a thread named `name`
  /// (visible in top/perf) with the engine on the wall clock.
  engine_runner(caf::actor_system& sys, const engine_factory& make, const std::string& name);
  ~engine_runner();

  engine_runner(const engine_runner&) = delete;
  engine_runner& operator=(const engine_runner&) = delete;

  /// Queues a job; jobs run one at a time, in order.
  void post(job j);
  /// Drops jobs not yet started, waits for the running one, joins. Idempotent.
  void stop();
  /// Jobs queued or running.
  size_t pending() const;
  const engine::model_info& info() const { return engine_->info(); }
  /// The engine's cost model (thread-safe: pure functions of the profile).
  const engine::engine& costs() const { return *engine_; }
  /// Inside a job: the time the job has reached (steady clock live; the actor
  /// clock's virtual time in simulation, including what the engine spent so far).
  time_point now() const;
  bool simulated() const { return virtual_ != nullptr; }

private:
  struct virtual_mode;
  void run();
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

#pragma once

// The one thread an engine instance runs on. Engines are synchronous and not
// thread-safe (engine.hpp); a prefill can take seconds. Workers stay responsive
// (load queries, cancels, new orders) by handing every engine call to this thread
// and receiving the outcome back through their actor_inbox.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "prfaas/engine/engine.hpp"

namespace prfaas::serving {

class engine_runner {
public:
  using job = std::function<void(engine::engine&)>;

  /// `name` names the thread (visible in top/perf).
  engine_runner(std::unique_ptr<engine::engine> e, const std::string& name);
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

private:
  void run();

  std::unique_ptr<engine::engine> engine_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<job> jobs_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace prfaas::serving

#include "common/engine_runner.hpp"

#include <pthread.h>

#include <algorithm>
#include <stdexcept>

namespace prfaas::serving {

/// State of the simulated runner (see the header).
struct engine_runner::virtual_mode final : effect_deferral {
  explicit virtual_mode(caf::actor_system& sys) : timer(sys) {}

  void defer(std::function<void()> fn) override {
    effects.emplace_back(clock.now() - job_clock0, std::move(fn));
  }

  engine::manual_clock clock;
  sim_timer timer;
  time_point busy_until{};
  time_point job_start{};
  engine::nanos job_clock0{0};
  bool in_job = false;
  std::deque<time_point> ends; ///< end of every job not yet over (for pending())
  std::vector<std::pair<engine::nanos, std::function<void()>>> effects;
};

engine_runner::engine_runner(caf::actor_system& sys, engine_factory make, const std::string& name,
                             failure_handler on_failure) {
  if (virtual_time(sys)) {
    virtual_ = std::make_unique<virtual_mode>(sys);
    engine_ = make(virtual_->clock);
    return;
  }
  wall_ = std::make_unique<engine::real_clock>();
  thread_ = std::thread([this, make = std::move(make), on_failure = std::move(on_failure)] {
    run(make, on_failure);
  });
  pthread_setname_np(thread_.native_handle(), name.substr(0, 15).c_str());
}

engine_runner::~engine_runner() {
  stop();
}

void engine_runner::when_ready(const std::shared_ptr<actor_inbox>& inbox,
                               std::function<void(const engine::model_info&)> ready) {
  if (virtual_) {
    ready(engine_->info());
    return;
  }
  post([inbox, ready = std::move(ready)](engine::engine& e) {
    inbox->post([ready, info = e.info()] { ready(info); });
  });
}

engine_runner::failure_handler engine_runner::crash(const std::shared_ptr<actor_inbox>& inbox) {
  return [inbox](const std::string& why) {
    inbox->post([why] { throw std::runtime_error("engine could not be built: " + why); });
  };
}

void engine_runner::post(job j) {
  if (virtual_) {
    if (!stopping_)
      run_virtual(j);
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return;
    jobs_.push_back(std::move(j));
  }
  cv_.notify_one();
}

void engine_runner::run_virtual(job& j) {
  auto& v = *virtual_;
  const auto now = v.timer.now();
  v.job_start = std::max(now, v.busy_until);
  v.job_clock0 = v.clock.now();
  v.effects.clear();
  v.in_job = true;
  {
    effect_deferral::scope scope{&v};
    j(*engine_);
  }
  v.in_job = false;
  v.busy_until = v.job_start + (v.clock.now() - v.job_clock0);
  while (!v.ends.empty() && v.ends.front() <= now)
    v.ends.pop_front();
  v.ends.push_back(v.busy_until);
  auto effects = std::move(v.effects);
  v.effects.clear();
  for (auto& [offset, fn] : effects)
    v.timer.at(v.job_start + offset, std::move(fn));
}

engine_runner::time_point engine_runner::now() const {
  if (!virtual_)
    return std::chrono::steady_clock::now();
  auto& v = *virtual_;
  if (!v.in_job)
    return v.timer.now();
  return v.job_start + (v.clock.now() - v.job_clock0);
}

void engine_runner::stop() {
  if (virtual_) {
    stopping_ = true;
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_ && !thread_.joinable())
      return;
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id())
    thread_.join();
}

size_t engine_runner::pending() const {
  if (virtual_) {
    const auto now = virtual_->timer.now();
    return static_cast<size_t>(std::count_if(virtual_->ends.begin(), virtual_->ends.end(),
                                             [&](auto t) { return t > now; }));
  }
  std::lock_guard<std::mutex> guard{mtx_};
  return jobs_.size() + running_;
}

void engine_runner::run(const engine_factory& make, const failure_handler& on_failure) {
  try {
    engine_ = make(*wall_);
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      jobs_.clear();
      stopping_ = true; // nothing can run without an engine
    }
    if (on_failure)
      on_failure(e.what());
    return;
  }
  for (;;) {
    job j;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_)
        return;
      j = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = 1;
    }
    j(*engine_);
    std::lock_guard<std::mutex> guard{mtx_};
    running_ = 0;
  }
}

} // namespace prfaas::serving

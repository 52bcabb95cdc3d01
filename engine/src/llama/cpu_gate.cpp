#include "llama/cpu_gate.hpp"

#include <pthread.h>

#include <chrono>
#include <future>

namespace prfaas::engine::llama_detail {

cpu_gate& cpu_gate::instance() {
  static cpu_gate gate;
  return gate;
}

cpu_gate::~cpu_gate() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable())
    worker_.join();
}

int32_t cpu_gate::run(const std::function<int32_t()>& graph, double& waited) {
  const auto queued = std::chrono::steady_clock::now();
  std::packaged_task<int32_t()> task([&] {
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - queued).count();
    {
      std::lock_guard lock(mu_);
      waited_ += waited;
    }
    return graph();
  });
  auto done = task.get_future();
  {
    std::lock_guard lock(mu_);
    jobs_.emplace_back([&task] { task(); });
    if (!worker_.joinable())
      worker_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "llama.compute");
        for (;;) {
          std::function<void()> next;
          {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty())
              return; // stopping, nothing left to run
            next = std::move(jobs_.front());
            jobs_.pop_front();
          }
          next();
        }
      });
  }
  cv_.notify_one();
  return done.get();
}

double cpu_gate::waited_seconds() const {
  std::lock_guard lock(mu_);
  return waited_;
}

} // namespace prfaas::engine::llama_detail

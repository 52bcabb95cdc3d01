#include "common/engine_runner.hpp"

#include <pthread.h>

namespace prfaas::serving {

engine_runner::engine_runner(std::unique_ptr<engine::engine> e, const std::string& name)
  : engine_(std::move(e)) {
  thread_ = std::thread([this] { run(); });
  pthread_setname_np(thread_.native_handle(), name.substr(0, 15).c_str());
}

engine_runner::~engine_runner() {
  stop();
}

void engine_runner::post(job j) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return;
    jobs_.push_back(std::move(j));
  }
  cv_.notify_one();
}

void engine_runner::stop() {
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
  std::lock_guard<std::mutex> guard{mtx_};
  return jobs_.size() + running_;
}

void engine_runner::run() {
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

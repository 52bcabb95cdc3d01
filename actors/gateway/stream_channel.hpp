#pragma once

// Hands a request's output from the gateway actor to the HTTP thread serving it.
// The actor pushes (never blocks); the HTTP thread waits with a timeout. The
// channel ends exactly once, with `finish` (success) or `fail`; the HTTP side can
// `abandon` it when the client goes away, which the actor sees on its next look.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "gateway/openai.hpp"

namespace prfaas::serving {

struct stream_update {
  output_delta out;                           ///< new output, in order
  std::optional<completion_summary> finished; ///< set on the last update (success)
  std::optional<api_error> error;             ///< set on the last update (failure)
};

class stream_channel {
public:
  /// Actor side.
  void push(output_delta d) {
    std::lock_guard<std::mutex> g{mtx_};
    if (ended_) {
      ++late_pushes_;
      return;
    }
    pending_.out.append(std::move(d));
    cv_.notify_one();
  }
  /// Ends the stream successfully; returns false if it had already ended.
  bool finish(completion_summary s) {
    return end([&] { pending_.finished = std::move(s); });
  }
  /// Ends the stream with an error; returns false if it had already ended.
  bool fail(api_error e) {
    return end([&] { pending_.error = std::move(e); });
  }
  /// Called once, in the actor's context, right after the stream ended (simulated
  /// clients, which have no thread waiting in next()). Set before the request is
  /// handed to the gateway.
  void on_end(std::function<void()> fn) { on_end_ = std::move(fn); }

  /// HTTP side: waits up to `timeout` for something new; returns what arrived (maybe
  /// nothing). After the last update (finished or error) returns nullopt.
  std::optional<stream_update> next(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> g{mtx_};
    if (delivered_end_)
      return std::nullopt;
    cv_.wait_for(g, timeout, [&] { return ended_ || !pending_.out.empty(); });
    stream_update out = std::move(pending_);
    pending_ = {};
    if (out.finished || out.error)
      delivered_end_ = true;
    return out;
  }
  bool ended_for_reader() const {
    std::lock_guard<std::mutex> g{mtx_};
    return delivered_end_;
  }

  /// How often the actor tried to end the stream (1 once it ended: more is a bug the
  /// chaos checker looks for) and pushed tokens after the end.
  uint32_t end_calls() const {
    std::lock_guard<std::mutex> g{mtx_};
    return end_calls_;
  }
  uint32_t late_pushes() const {
    std::lock_guard<std::mutex> g{mtx_};
    return late_pushes_;
  }

  /// HTTP side: the client went away.
  void abandon() { abandoned_.store(true); }
  bool abandoned() const { return abandoned_.load(); }

private:
  /// Records the last update (under the lock), wakes the reader, then tells on_end.
  template <class Fn> bool end(Fn&& last) {
    {
      std::lock_guard<std::mutex> g{mtx_};
      ++end_calls_;
      if (ended_)
        return false;
      ended_ = true;
      last();
      cv_.notify_one();
    }
    if (on_end_)
      on_end_();
    return true;
  }

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  stream_update pending_;
  bool ended_ = false;
  bool delivered_end_ = false;
  uint32_t end_calls_ = 0;
  uint32_t late_pushes_ = 0;
  std::atomic<bool> abandoned_{false};
  std::function<void()> on_end_;
};

} // namespace prfaas::serving

#pragma once

// Runs code on an actor from another thread. Engine threads, the data plane's I/O
// thread and HTTP handler threads never touch actor state directly: they post a
// closure, and the actor runs it in its own context when it handles `wake_atom`.
// One wake message is in flight at a time however many closures wait, so a burst
// of posts costs one mailbox entry.
//
//   auto inbox = std::make_shared<actor_inbox>(self);     // in the actor
//   ... [wake_atom) { inbox->drain(); } ...               // in its behavior
//   inbox->post([self, r = std::move(r)] { ... });        // from any thread

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/sim_time.hpp"

namespace prfaas::serving {

class actor_inbox : public std::enable_shared_from_this<actor_inbox> {
public:
  /// Holds `self` weakly: an inbox kept alive by another thread never keeps the
  /// actor alive, and posts after the actor ended are dropped.
  template <class Handle>
  explicit actor_inbox(Handle self) : target_(caf::actor_cast<caf::weak_actor_ptr>(self)) {}

  /// Thread-safe; never blocks on the actor. Returns false when the actor is gone.
  /// Inside a simulated engine job the post happens at the job's virtual instant
  /// (engine_runner.hpp).
  bool post(std::function<void()> fn) {
    if (auto* d = effect_deferral::current()) {
      // Always made with make_shared (see above), so weak_from_this() is set.
      d->defer([w = weak_from_this(), fn = std::move(fn)]() mutable {
        if (auto inbox = w.lock())
          inbox->post(std::move(fn));
      });
      return true;
    }
    auto strong = target_.lock();
    if (!strong)
      return false;
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      queue_.push_back(std::move(fn));
      wake = !wake_pending_;
      wake_pending_ = true;
    }
    if (wake)
      caf::anon_send(caf::actor_cast<caf::actor>(strong), wake_atom_v);
    return true;
  }

  /// Runs everything posted so far, in order. Only from the actor's own context.
  void drain() {
    std::deque<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      batch.swap(queue_);
      wake_pending_ = false;
    }
    for (auto& fn : batch)
      fn();
  }

private:
  caf::weak_actor_ptr target_;
  std::mutex mtx_;
  std::deque<std::function<void()>> queue_;
  bool wake_pending_ = false;
};

} // namespace prfaas::serving

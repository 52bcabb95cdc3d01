#pragma once

// Virtual time for simulated nodes. Under CAF's test coordinator the actor clock is
// virtual: it moves only when the harness fires the next timer. Work that "takes"
// time without a timer — an engine job computing for 1.8 s of modeled time — runs at
// once, and what it does (posts to an actor, data-plane pushes) is *deferred* to the
// virtual instant the job's own clock had reached when it did it:
//
//   sim_timer timer{sys};                        // one per component that defers
//   struct collect : effect_deferral { ... };    // records (offset, fn) during a job
//   { effect_deferral::scope s{&collect}; job(); }
//   for (auto& [off, fn] : collect.effects) timer.at(start + off, fn);
//
// Components with effects (actor_inbox::post, the simulated data plane) ask
// effect_deferral::current() first and hand themselves to it when one is active.

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_clock.hpp>
#include <caf/actor_system.hpp>

namespace prfaas {

/// True when `sys` runs on CAF's test coordinator: time is virtual, nothing may
/// block or run on a thread of its own (a simulation, or a deterministic test).
bool virtual_time(caf::actor_system& sys);

/// Collects the effects of a job that runs ahead of virtual time (see above).
class effect_deferral {
public:
  virtual ~effect_deferral() = default;
  /// Runs `fn` later, at the virtual instant the current job has reached.
  virtual void defer(std::function<void()> fn) = 0;

  /// The deferral active on this thread, or null (then effects happen now).
  static effect_deferral* current() noexcept;

  /// Makes `d` current on this thread for the scope's lifetime (nests).
  class scope {
  public:
    explicit scope(effect_deferral* d) noexcept;
    ~scope();
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

  private:
    effect_deferral* prev_;
  };
};

/// The simulation's own queue of callbacks at virtual instants, for a driver that runs
/// them from its loop beside CAF's timeouts (apps/prfaas-sim's sim_world). Cheaper than
/// a CAF delayed message per callback (no mailbox, no scheduling, no actor to resume),
/// which is most of the cost of a large simulation. Equal instants run in the order
/// they were pushed; the driver decides how they interleave with CAF's own timeouts.
/// Single-threaded, like the test coordinator.
class sim_event_queue {
public:
  using time_point = caf::actor_clock::time_point;

  sim_event_queue() = default;
  sim_event_queue(const sim_event_queue&) = delete;
  sim_event_queue& operator=(const sim_event_queue&) = delete;
  ~sim_event_queue();

  /// Makes this queue the one sim_timers of `sys` created from now on use; null
  /// uninstalls. Timers made without one fall back to CAF delayed messages.
  static void install(caf::actor_system& sys, sim_event_queue* q);
  static sim_event_queue* of(caf::actor_system& sys);

  /// `fn` at `t`, skipped when `owner` has expired by then.
  void push(time_point t, std::weak_ptr<void> owner, std::function<void()> fn);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  /// The earliest instant queued; only when not empty.
  time_point next() const { return heap_.front().t; }
  /// Removes the earliest callback and runs it (unless its owner is gone).
  void run_next();
  /// Drops everything queued (before the actor system goes away).
  void clear() { heap_.clear(); }

private:
  struct event {
    time_point t;
    uint64_t seq;
    std::weak_ptr<void> owner;
    std::function<void()> fn;
  };
  struct later {
    bool operator()(const event& a, const event& b) const {
      return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
  };
  std::vector<event> heap_;
  uint64_t seq_ = 0;
};

/// Runs callbacks at virtual instants: on the system's sim_event_queue when one is
/// installed, else each as a delayed message to a small actor; either way in order with
/// every other timer and delivery of the simulation (equal instants in the order they
/// were scheduled). None runs after the timer is destroyed.
class sim_timer {
public:
  using time_point = caf::actor_clock::time_point;

  explicit sim_timer(caf::actor_system& sys);
  ~sim_timer();
  sim_timer(const sim_timer&) = delete;
  sim_timer& operator=(const sim_timer&) = delete;

  time_point now() const;
  /// Runs `fn` at `t` (at once, in order, if `t` is not in the future).
  void at(time_point t, std::function<void()> fn);
  void after(std::chrono::nanoseconds d, std::function<void()> fn) { at(now() + d, std::move(fn)); }

private:
  caf::actor_system& sys_;
  caf::actor actor_;
  sim_event_queue* queue_;
  std::shared_ptr<char> alive_ = std::make_shared<char>(); ///< queued callbacks' owner
};

} // namespace prfaas

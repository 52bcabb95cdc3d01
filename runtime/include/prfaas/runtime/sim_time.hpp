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

/// Runs callbacks at virtual instants: each is a delayed message to a small actor, so
/// it fires in order with every other timer and delivery of the simulation (equal
/// instants in the order they were scheduled). Callbacks run in that actor's context;
/// none runs after the timer is destroyed.
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
};

} // namespace prfaas

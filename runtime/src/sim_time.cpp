#include "prfaas/runtime/sim_time.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

namespace prfaas {

namespace {

thread_local effect_deferral* current_deferral = nullptr;

/// A callback travelling as a (delayed) message to the timer actor.
struct sim_callback {
  std::function<void()> fn;
};

} // namespace
} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::sim_callback)

namespace prfaas {

bool virtual_time(caf::actor_system& sys) {
  return dynamic_cast<caf::scheduler::test_coordinator*>(&sys.scheduler()) != nullptr;
}

effect_deferral* effect_deferral::current() noexcept {
  return current_deferral;
}

effect_deferral::scope::scope(effect_deferral* d) noexcept : prev_(current_deferral) {
  current_deferral = d;
}

effect_deferral::scope::~scope() {
  current_deferral = prev_;
}

namespace {

caf::behavior timer_actor(caf::event_based_actor*) {
  return {[](sim_callback& cb) { cb.fn(); }};
}

} // namespace

// Hidden: a timer is plumbing, not a role — the actor system does not wait for it at
// shutdown (under the test coordinator nothing would run its exit).
sim_timer::sim_timer(caf::actor_system& sys)
  : sys_(sys), actor_(sys.spawn<caf::hidden>(timer_actor)) {
}

sim_timer::~sim_timer() {
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

sim_timer::time_point sim_timer::now() const {
  return sys_.clock().now();
}

void sim_timer::at(time_point t, std::function<void()> fn) {
  auto now = sys_.clock().now();
  // Not in the future: a plain message keeps it behind what is already queued now.
  if (t <= now)
    caf::anon_send(actor_, sim_callback{std::move(fn)});
  else
    caf::delayed_anon_send(actor_, t - now, sim_callback{std::move(fn)});
}

} // namespace prfaas

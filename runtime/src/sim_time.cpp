#include "prfaas/runtime/sim_time.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <algorithm>
#include <map>
#include <mutex>

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

/// A class rather than a function: CAF 0.17 spawns a function actor without arguments
/// by dereferencing an empty tuple pointer (undefined behaviour UBSan reports).
class timer_actor final : public caf::event_based_actor {
public:
  using caf::event_based_actor::event_based_actor;
  caf::behavior make_behavior() override {
    return {[](sim_callback& cb) { cb.fn(); }};
  }
};

} // namespace

// Hidden: a timer is plumbing, not a role — the actor system does not wait for it at
// shutdown (under the test coordinator nothing would run its exit).
sim_timer::sim_timer(caf::actor_system& sys)
    : sys_(sys), actor_(sys.spawn<timer_actor, caf::hidden>()), queue_(sim_event_queue::of(sys)) {}

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
  else if (queue_)
    queue_->push(t, alive_, std::move(fn));
  else
    caf::delayed_anon_send(actor_, t - now, sim_callback{std::move(fn)});
}

// -- sim_event_queue ----------------------------------------------------------------

namespace {

std::mutex queues_mtx;
std::map<caf::actor_system*, sim_event_queue*>& queues() {
  static std::map<caf::actor_system*, sim_event_queue*> m;
  return m;
}

} // namespace

sim_event_queue::~sim_event_queue() {
  std::lock_guard<std::mutex> guard{queues_mtx};
  for (auto i = queues().begin(); i != queues().end();)
    i = i->second == this ? queues().erase(i) : std::next(i);
}

void sim_event_queue::install(caf::actor_system& sys, sim_event_queue* q) {
  std::lock_guard<std::mutex> guard{queues_mtx};
  if (q)
    queues()[&sys] = q;
  else
    queues().erase(&sys);
}

sim_event_queue* sim_event_queue::of(caf::actor_system& sys) {
  std::lock_guard<std::mutex> guard{queues_mtx};
  auto i = queues().find(&sys);
  return i == queues().end() ? nullptr : i->second;
}

void sim_event_queue::push(time_point t, std::weak_ptr<void> owner, std::function<void()> fn) {
  heap_.push_back({t, ++seq_, std::move(owner), std::move(fn)});
  std::push_heap(heap_.begin(), heap_.end(), later{});
}

void sim_event_queue::run_next() {
  std::pop_heap(heap_.begin(), heap_.end(), later{});
  event e = std::move(heap_.back());
  heap_.pop_back();
  if (!e.owner.expired())
    e.fn();
}

} // namespace prfaas

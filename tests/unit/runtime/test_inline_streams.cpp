// Inline delivery decides per frame: a frame for an idle actor with nothing waiting
// behind it runs that actor on the wire thread; under load (frames waiting) only a stream
// to one actor (a frame for the same actor as the frame before it) does, held back while
// its burst lands and then run once for all of it; frames for another actor go to CAF's
// workers. Frames are handed to the messenger by this test's thread, standing in for the
// wire's own thread, so where (and when) an actor ran is exact.

#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/runtime/actor_system.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/messenger.hpp"
#include "prfaas/runtime/metrics.hpp"

using namespace std::chrono_literals;

namespace {

/// A wire whose frames come from the test: `own_thread` says they arrive on the wire's
/// thread, which here is the test's.
class handed_wire final : public prfaas::frame_wire {
public:
  void start(inbound_handler on_frame, drop_handler) override { on_frame_ = std::move(on_frame); }
  prfaas::send_status send(const std::string&, std::string, prfaas::bulk_ptr) override {
    return prfaas::send_status::queued;
  }
  size_t purge(const std::string&) override { return 0; }
  void stop() override {}
  std::string local_endpoint() const override { return "handed"; }
  bool own_thread() const override { return true; }

  void hand(const std::string& bytes, bool more_waiting) {
    prfaas::inbound_frame f;
    f.header = reinterpret_cast<const std::byte*>(bytes.data());
    f.header_size = bytes.size();
    f.parts = 1;
    f.more_waiting = more_waiting;
    on_frame_(f);
  }

private:
  inbound_handler on_frame_;
};

/// The threads an actor's messages ran on, in order.
struct ran_on {
  std::mutex mtx;
  std::vector<std::thread::id> threads;
  size_t size() {
    std::lock_guard<std::mutex> g{mtx};
    return threads.size();
  }
  std::thread::id last() {
    std::lock_guard<std::mutex> g{mtx};
    return threads.back();
  }
};

caf::behavior recorder(caf::event_based_actor*, std::shared_ptr<ran_on> log) {
  return {[log](prfaas::remote_message&) {
    std::lock_guard<std::mutex> g{log->mtx};
    log->threads.push_back(std::this_thread::get_id());
  }};
}

std::string frame(prfaas::wire::Kind kind, const std::string& to) {
  prfaas::wire::Envelope e;
  e.set_protocol_version(prfaas::protocol_version);
  e.set_kind(kind);
  e.mutable_source()->set_node("peer");
  e.mutable_destination()->set_node("self");
  e.set_source_incarnation(1);
  if (kind != prfaas::wire::HEARTBEAT) {
    e.mutable_source()->set_actor("src");
    e.mutable_destination()->set_actor(to);
    e.set_type("test.Nothing");
  }
  return e.SerializeAsString();
}

/// A messenger on a handed wire, with recording actors `a` and `b`.
struct inline_world {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<prfaas::messenger> msgr;
  std::shared_ptr<handed_wire> wire = std::make_shared<handed_wire>();
  std::shared_ptr<ran_on> a = std::make_shared<ran_on>(), b = std::make_shared<ran_on>();
  const std::thread::id here = std::this_thread::get_id();

  explicit inline_world(bool inline_delivery) {
    prfaas::configure_actor_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    prfaas::transport_config tc;
    tc.inline_delivery = inline_delivery;
    msgr = std::make_shared<prfaas::messenger>(
        *sys, "self", 7, std::set<std::string>{"self", "peer"}, tc,
        std::make_shared<prfaas::metrics>("self"), prfaas::make_null_logger());
    msgr->start(wire, caf::actor{}); // no transport actor: heartbeats go nowhere
    msgr->register_actor("a", sys->spawn(recorder, a));
    msgr->register_actor("b", sys->spawn(recorder, b));
    std::this_thread::sleep_for(50ms); // both started and idle
  }
  ~inline_world() { msgr->stop(); }

  ran_on& log(const std::string& to) { return to == "a" ? *a : *b; }
  void hand(const std::string& to, bool more_waiting) {
    wire->hand(frame(prfaas::wire::ONEWAY, to), more_waiting);
  }
  /// Waits until `to` has handled `n` messages in all; true when the last ran here.
  bool ran_here(const std::string& to, size_t n) {
    auto& l = log(to);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (l.size() < n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    REQUIRE(l.size() == n);
    const bool inline_here = l.last() == here;
    if (!inline_here)
      std::this_thread::sleep_for(50ms); // the worker that ran it lets it go (idle again)
    return inline_here;
  }
  /// Hands one frame and waits for it to be handled: true when it ran here.
  bool deliver(const std::string& to, bool more_waiting) {
    const size_t n = log(to).size() + 1;
    hand(to, more_waiting);
    return ran_here(to, n);
  }
};

} // namespace

TEST_CASE("inline delivery under load: a stream to one actor stays on the wire thread") {
  const bool on = GENERATE(true, false);
  INFO("inline_delivery: " << on);
  inline_world w{on};

  CHECK(w.deliver("a", false) == on); // idle, nothing waiting
  // Under load, a stream to a (the same actor as the frame before): with inline
  // delivery held while frames wait, then run here for the whole burst; without, on
  // the workers.
  w.hand("a", true);
  w.hand("a", true);
  w.hand("a", true);
  if (on) {
    std::this_thread::sleep_for(20ms);
    CHECK(w.a->size() == 1); // held
  }
  w.hand("a", false); // the burst's last frame
  CHECK(w.ran_here("a", 5) == on);
  CHECK_FALSE(w.deliver("b", true)); // under load, another actor: a worker
  w.hand("b", true);                 // ... then a stream to it
  w.wire->hand(frame(prfaas::wire::HEARTBEAT, ""), true);
  w.hand("b", true); // a heartbeat between does not break the stream
  if (on) {
    std::this_thread::sleep_for(20ms);
    CHECK(w.b->size() == 1); // still held
  }
  w.hand("b", false);
  CHECK(w.ran_here("b", 4) == on);
  CHECK(w.deliver("a", false) == on); // nothing waiting: inline again, whichever actor
}

TEST_CASE("inline delivery: a held stream runs when its burst ends, however it ends") {
  inline_world w{true};
  auto under_load = [&](const std::string& to) { // a worker's turn, then a stream to `to`
    const size_t n = w.log(to).size() + 1;
    w.hand(to, true);
    REQUIRE_FALSE(w.ran_here(to, n));
  };

  SECTION("a frame for another actor") {
    under_load("a");
    w.hand("a", true); // held
    w.hand("b", true); // goes to a worker; a's burst is over
    CHECK(w.ran_here("a", 2));
    CHECK_FALSE(w.ran_here("b", 1));
  }
  SECTION("a frame that is dropped") {
    under_load("a");
    w.hand("a", true);
    w.wire->hand("not an envelope", false); // malformed, dropped: still the burst's end
    CHECK(w.ran_here("a", 2));
  }
  SECTION("the bound on a held burst") {
    under_load("a");
    // 64 frames are held at most; the 65th runs them all though frames still wait.
    for (int i = 0; i < 65; ++i)
      w.hand("a", true);
    CHECK(w.ran_here("a", 66));
  }
  SECTION("the messenger stopping mid-burst hands the stream to the workers") {
    under_load("a");
    w.hand("a", true);
    w.hand("a", true);
    w.msgr->stop();
    CHECK_FALSE(w.ran_here("a", 3));
  }
}

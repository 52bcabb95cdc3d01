// Inline delivery decides per frame: a frame for an idle actor with nothing waiting
// behind it runs that actor on the wire thread; under load (frames waiting) only a frame
// for the same actor as the frame before it does (a stream to one actor), and frames for
// another actor go to CAF's workers. Frames are handed to the messenger by this test's
// thread, standing in for the wire's own thread, so where an actor ran is exact.

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

} // namespace

TEST_CASE("inline delivery under load: a stream to one actor stays on the wire thread") {
  const bool inline_delivery = GENERATE(true, false);
  INFO("inline_delivery: " << inline_delivery);
  caf::actor_system_config cfg;
  prfaas::configure_actor_system(cfg);
  caf::actor_system sys{cfg};
  prfaas::transport_config tc;
  tc.inline_delivery = inline_delivery;
  auto m = std::make_shared<prfaas::messenger>(
      sys, "self", 7, std::set<std::string>{"self", "peer"}, tc,
      std::make_shared<prfaas::metrics>("self"), prfaas::make_null_logger());
  auto wire = std::make_shared<handed_wire>();
  m->start(wire, caf::actor{}); // no transport actor: heartbeats go nowhere
  auto log_a = std::make_shared<ran_on>(), log_b = std::make_shared<ran_on>();
  m->register_actor("a", sys.spawn(recorder, log_a));
  m->register_actor("b", sys.spawn(recorder, log_b));
  std::this_thread::sleep_for(50ms); // both started and idle

  const auto here = std::this_thread::get_id();
  // Hands one frame and waits for the actor to have handled it (so it is idle again):
  // true when it ran on this thread.
  auto deliver = [&](const std::string& to, bool more_waiting) {
    auto& log = to == "a" ? *log_a : *log_b;
    const size_t before = log.size();
    wire->hand(frame(prfaas::wire::ONEWAY, to), more_waiting);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (log.size() == before && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    REQUIRE(log.size() == before + 1);
    const bool inline_here = log.last() == here;
    if (!inline_here)
      std::this_thread::sleep_for(50ms); // the worker that ran it lets it go (idle again)
    return inline_here;
  };

  const bool on = inline_delivery;
  CHECK(deliver("a", false) == on); // idle, nothing waiting
  CHECK(deliver("a", true) == on);  // under load, same actor as the frame before
  CHECK(deliver("a", true) == on);
  CHECK_FALSE(deliver("b", true)); // under load, another actor: a worker
  CHECK(deliver("b", true) == on); // ... then a stream to it
  wire->hand(frame(prfaas::wire::HEARTBEAT, ""), true);
  CHECK(deliver("b", true) == on); // a heartbeat between does not break the stream
  CHECK_FALSE(deliver("a", true));
  CHECK(deliver("b", false) == on); // nothing waiting: inline again, whichever actor

  m->stop();
}

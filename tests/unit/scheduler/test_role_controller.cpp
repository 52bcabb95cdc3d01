// The long-term controller: P/D conversion of convertible PD nodes (both roles hosted,
// one on standby) when one PD stage is loaded and the other idle; drain first, then
// switch; one at a time, a cooldown, never below the minimum of a role, a stuck
// drain undone.

#include <catch2/catch.hpp>

#include "scheduler/role_controller.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;

namespace {

worker_view pd_worker(const std::string& node, const std::string& actor, bool enabled) {
  worker_view w{.addr = {node, actor}, .cluster = "pd"};
  w.enabled = enabled;
  w.capacity = actor == "dec" ? 10 : 64;
  return w;
}

/// Node a: prefill only. Nodes b, c: convertible, serving decode (prefill on standby).
cluster_view pd_cluster() {
  cluster_view v;
  v.prefill = {pd_worker("a", "pdp", true), pd_worker("b", "pdp", false),
               pd_worker("c", "pdp", false)};
  v.decode = {pd_worker("b", "dec", true), pd_worker("c", "dec", true)};
  return v;
}

role_controller::settings fast() {
  role_controller::settings s;
  s.interval = 1s;
  s.cooldown = 10s;
  s.drain_timeout = 30s;
  s.smoothing = 1.0; // no memory: each tick judges the view as it is
  s.prefill_full_tokens = 1000;
  return s;
}

const role_controller::time_point t0{std::chrono::seconds(1000)};

/// A load report arrives for worker `w`.
void report(worker_view& w, uint32_t queue, uint32_t active, uint64_t queued_tokens) {
  w.queue = queue;
  w.active = active;
  w.queued_tokens = queued_tokens;
  w.assigned = 0;
  w.assigned_tokens = 0;
  ++w.reports;
}

} // namespace

TEST_CASE("role controller: only nodes with both roles, one on standby, are convertible") {
  auto v = pd_cluster();
  CHECK(role_controller{fast(), v}.convertible() == 2);
  v.prefill[1].enabled = true; // b serves both roles at once: not the controller's
  CHECK(role_controller{fast(), v}.convertible() == 1);
}

TEST_CASE(
    "role controller: prefill overloaded, decode idle: a decode node drains, then serves prefill") {
  auto v = pd_cluster();
  role_controller rc{fast(), v};
  report(v.prefill[0], 5, 1, 5000); // 5x full
  report(v.decode[0], 0, 3, 0);     // busier decode node
  report(v.decode[1], 0, 1, 0);     // least busy: the one to convert
  auto e = rc.tick(t0, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].node == "c");
  CHECK(e[0].to == "prefill");
  CHECK(e[0].phase == "draining");
  CHECK_FALSE(v.decode[1].enabled);  // no new decode work on c
  CHECK_FALSE(v.prefill[2].enabled); // and no prefill yet
  // Not drained: the last report still shows a sequence; no report since either.
  CHECK(rc.tick(t0 + 1s, v).empty());
  report(v.decode[1], 0, 1, 0);
  CHECK(rc.tick(t0 + 2s, v).empty());
  // A fresh report shows it empty: converted.
  report(v.decode[1], 0, 0, 0);
  e = rc.tick(t0 + 3s, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].phase == "converted");
  CHECK(v.prefill[2].enabled);
  CHECK_FALSE(v.decode[1].enabled);
  CHECK(rc.conversions() == 1);
  CHECK(role_controller::pd_roles(v) == std::pair<uint32_t, uint32_t>{2, 1});
  // Still overloaded, but b is the last decode node (min_decode = 1): nothing more.
  report(v.prefill[0], 5, 1, 5000);
  report(v.prefill[2], 5, 1, 5000);
  CHECK(rc.tick(t0 + 20s, v).empty());
}

TEST_CASE("role controller: a cooldown between conversions, and decode overload converts back") {
  auto v = pd_cluster();
  auto s = fast();
  role_controller rc{s, v};
  report(v.prefill[0], 5, 1, 5000);
  report(v.decode[0], 0, 0, 0);
  report(v.decode[1], 0, 0, 0);
  REQUIRE(rc.tick(t0, v).size() == 1); // b or c drains
  report(v.decode[0], 0, 0, 0);
  report(v.decode[1], 0, 0, 0);
  REQUIRE(rc.tick(t0 + 1s, v).at(0).phase == "converted");
  // Now decode is saturated and prefill idle, but within the cooldown nothing moves.
  for (auto* w : {&v.prefill[0], &v.prefill[1], &v.prefill[2]})
    report(*w, 0, 0, 0);
  for (auto& w : v.decode)
    report(w, 4, 10, 0);
  CHECK(rc.tick(t0 + 5s, v).empty());
  auto e = rc.tick(t0 + 12s, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].to == "decode");
  CHECK(e[0].phase == "draining");
}

TEST_CASE("role controller: balanced stages leave the roles alone, and a stuck drain is undone") {
  auto v = pd_cluster();
  role_controller rc{fast(), v};
  report(v.prefill[0], 1, 1, 500); // half full
  report(v.decode[0], 0, 5, 0);
  report(v.decode[1], 0, 5, 0);
  CHECK(rc.tick(t0, v).empty());
  // Prefill overloaded, decode idle: c starts draining, but a sequence never leaves.
  report(v.prefill[0], 5, 1, 5000);
  report(v.decode[0], 0, 0, 0);
  report(v.decode[1], 0, 1, 0);
  REQUIRE(rc.tick(t0 + 1s, v).size() == 1);
  const size_t draining = v.decode[0].enabled ? 1 : 0;
  for (int i = 2; i < 31; ++i) {
    report(v.decode[draining], 0, 1, 0);
    CHECK(rc.tick(t0 + std::chrono::seconds(i), v).empty());
  }
  auto e = rc.tick(t0 + 31s, v);
  REQUIRE(e.size() == 1);
  CHECK(e[0].phase == "aborted");
  CHECK(v.decode[draining].enabled);
  CHECK(rc.conversions() == 0);
}

TEST_CASE("role controller: toward a target several nodes away, `parallel` nodes drain at once") {
  // Node a: prefill only. Nodes b, c, d: convertible, serving decode. Node e: decode only.
  cluster_view v;
  v.prefill = {pd_worker("a", "pdp", true), pd_worker("b", "pdp", false),
               pd_worker("c", "pdp", false), pd_worker("d", "pdp", false)};
  v.decode = {pd_worker("b", "dec", true), pd_worker("c", "dec", true), pd_worker("d", "dec", true),
              pd_worker("e", "dec", true)};
  for (uint32_t parallel : {1u, 2u}) {
    INFO("parallel " << parallel);
    auto w = v;
    auto s = fast();
    s.parallel = parallel;
    role_controller rc{s, w};
    rc.set_target(4); // three nodes to convert; e must stay decode (min_decode 1)
    auto e = rc.tick(t0, w);
    CHECK(e.size() == parallel);
    for (auto& x : e)
      CHECK((x.to == "prefill" && x.phase == "draining"));
    // The drains finish (a fresh, empty report from each).
    for (auto& d : w.decode)
      if (!d.enabled)
        report(d, 0, 0, 0);
    e = rc.tick(t0 + 1s, w);
    CHECK(e.size() == parallel);
    CHECK(role_controller::pd_roles(w) ==
          std::pair<uint32_t, uint32_t>{1 + parallel, 4 - parallel});
    // The cooldown holds the rest back; after it, the next round: one node either way
    // (parallel 2: the last of three; parallel 1: one at a time).
    CHECK(rc.tick(t0 + 5s, w).empty());
    e = rc.tick(t0 + 12s, w);
    CHECK(e.size() == 1);
    for (auto& d : w.decode)
      if (!d.enabled && d.addr.node != "e")
        report(d, 0, 0, 0);
    rc.tick(t0 + 13s, w);
    if (parallel == 2) // three conversions in two rounds: a, b, c, d prefill, e decode
      CHECK(role_controller::pd_roles(w) == std::pair<uint32_t, uint32_t>{4, 1});
    else // one at a time: three rounds
      CHECK(role_controller::pd_roles(w) == std::pair<uint32_t, uint32_t>{3, 2});
  }
}

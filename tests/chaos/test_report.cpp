// Judging a run: each request lands in exactly one outcome, and the run passes only
// with nothing lost or duplicated and every bound held.

#include <catch2/catch.hpp>

#include "report.hpp"

using namespace prfaas::chaos;
using json = nlohmann::json;

namespace {

request_record rec(const std::string& status, unsigned got = 8, double e2e_ms = 100,
                   bool stream = true) {
  return {stream, json{{"index", 0},
                       {"status", status},
                       {"requested_output_tokens", 8},
                       {"output_tokens", got},
                       {"e2e_ms", e2e_ms}}};
}

/// The report's text has `line` in it.
bool says(const report& r, const std::string& line) {
  return r.text().find(line) != std::string::npos;
}

/// `r`'s first fault judged again as `out`: whether that judgement's `check` and the
/// whole run both fail.
bool fails_on(report& r, fault_outcome out, bool fault_outcome::*check) {
  r.faults[0] = std::move(out);
  return !(r.faults[0].*check) && !r.passed();
}

} // namespace

TEST_CASE("every request has exactly one outcome") {
  std::vector<request_record> rs{
      rec("ok"),                // completed
      rec("ok", 8, 100, false), // completed (whole response)
      rec("http_503"),          // clean failure: a status
      rec("stream_error"),      // clean failure: an SSE error event
      rec("timeout"),           // lost: no answer in time
      rec("connection_error"),  // lost: dropped without an error
      rec("bad_response"),      // lost: truncated stream
      rec("ok", 5),             // lost: tokens missing
      rec("ok", 8, 20'000),     // lost: answered after the 10 s deadline
      rec("ok", 9),             // duplicated
      rec("client_saturated"),  // never sent
  };
  auto t = classify(rs, 10);
  CHECK(t.sent == 10);
  CHECK(t.not_sent == 1);
  CHECK(t.completed == 2);
  CHECK(t.failed == 2);
  CHECK(t.failed_by == std::map<std::string, size_t>{{"http_503", 1}, {"stream_error", 1}});
  CHECK(t.lost == 5);
  CHECK(t.lost_by == std::map<std::string, size_t>{{"timeout", 1},
                                                   {"connection_error", 1},
                                                   {"bad_response", 1},
                                                   {"missing_tokens", 1},
                                                   {"after_deadline", 1}});
  CHECK(t.duplicated == 1);
  CHECK(t.completed + t.failed + t.lost + t.duplicated == t.sent);
  CHECK(t.lost_requests.size() == 6);
}

TEST_CASE("a run passes only without losses and within every bound") {
  fault_spec f;
  f.kind = fault_kind::kill;
  f.node = "n";
  f.restart_after = seconds{3};
  f.detect_within = seconds{2};
  f.recover_within = seconds{5};

  report r;
  r.requests = classify({rec("ok"), rec("http_429")}, 10);
  r.faults.push_back(judge(f, 5, 8, detection{1.5, "m", 4.0}));
  CHECK(r.passed());

  SECTION("detected too late") {
    CHECK(fails_on(r, judge(f, 5, 8, detection{2.5, "m", 4.0}), &fault_outcome::detect_ok));
  }
  SECTION("never detected") {
    r.faults[0] = judge(f, 5, 8, detection{});
    CHECK_FALSE(r.passed());
  }
  SECTION("not healthy again in time") {
    CHECK(
        fails_on(r, judge(f, 5, 8, detection{1.0, "m", std::nullopt}), &fault_outcome::recover_ok));
  }
  SECTION("a fault no observer saw has nothing to recover from") {
    fault_spec brief = f;
    brief.detect_within.reset(); // too short for the detector: no bound on detection
    r.faults[0] = judge(brief, 5, 5.3, detection{});
    CHECK(r.faults[0].recover_ok);
    CHECK(r.passed());
    CHECK(says(r, "never seen faulty"));
    SECTION("but one it saw must be healthy again in time") {
      CHECK(fails_on(r, judge(brief, 5, 5.3, detection{0.2, "m", std::nullopt}),
                     &fault_outcome::recover_ok));
    }
  }
  SECTION("recovery held by a later fault on the same nodes counts from that one's end") {
    detection d{1.0, "m", 3.0};
    d.held_s = 12.0; // the later fault ended 12 s after this one was undone
    d.held_by = "blackhole a <-> b for 2 s";
    r.faults[0] = judge(f, 5, 8, d);
    CHECK(r.faults[0].recover_ok); // 3 s after the later fault's end, within 5
    CHECK(r.passed());
    CHECK(says(r, "healthy again after 3.000 s from the end of blackhole a <-> b for 2 s"));
    SECTION("and still within the bound") {
      d.recovered_s = 6.0;
      CHECK(fails_on(r, judge(f, 5, 8, d), &fault_outcome::recover_ok));
    }
  }
  SECTION("a lost request") {
    r.requests = classify({rec("ok"), rec("timeout")}, 10);
    CHECK_FALSE(r.passed());
  }
  SECTION("nothing sent proves nothing") {
    r.requests = classify({rec("client_saturated")}, 10);
    CHECK_FALSE(r.passed());
  }
  SECTION("the JSON report carries the figures") {
    auto j = r.to_json();
    CHECK(j["passed"] == true);
    CHECK(j["requests"]["failed_with_error"] == 1);
    CHECK(j["faults"][0]["detected_s"] == 1.5);
  }
}

TEST_CASE("one link of several down: nothing routed across it, and the faster link took more "
          "before") {
  fault_spec f;
  f.kind = fault_kind::link_down;
  f.link = {"east", "pd"};
  f.lasts = seconds{8};
  f.detect_within = seconds{9};
  report r;
  r.requests = classify({rec("ok")}, 10);
  detection seen{2.0, "pd-gw", 3.0};
  seen.routes_before = {{"east", {23, 400e6}}, {"west", {3, 100e6}}};
  seen.routed_across = 0;
  r.faults.push_back(judge(f, 10, 18, seen));
  CHECK(r.passed());
  CHECK(says(r, "offloads routed across it from detection to its end: 0"));

  SECTION("an offload routed across the downed link fails the run") {
    seen.routed_across = 2;
    CHECK(fails_on(r, judge(f, 10, 18, seen), &fault_outcome::across_ok));
    CHECK(says(r, "ROUTED ACROSS"));
  }
  SECTION("the slower link taking more fails the run") {
    seen.routes_before = {{"east", {5, 400e6}}, {"west", {9, 100e6}}};
    CHECK(fails_on(r, judge(f, 10, 18, seen), &fault_outcome::rates_ok));
    CHECK(says(r, "AGAINST THE RATES"));
  }
  SECTION("too few offloads to judge the split") {
    seen.routes_before = {{"east", {2, 400e6}}, {"west", {3, 100e6}}};
    r.faults[0] = judge(f, 10, 18, seen);
    CHECK(r.faults[0].rates_ok);
  }
}

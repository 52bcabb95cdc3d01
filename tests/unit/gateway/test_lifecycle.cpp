// The gateway's request state machine: exactly the documented edges, terminal states
// that absorb everything, attempts counted on each entry to prefilling.

#include <set>
#include <utility>

#include <catch2/catch.hpp>

#include "gateway/lifecycle.hpp"

using namespace prfaas::serving;
using s = request_state;

namespace {

constexpr s all_states[] = {s::accepted, s::routed, s::prefilling, s::transferring,
                            s::decoding, s::done,   s::failed};

/// The machine of lifecycle.hpp, written out edge by edge.
const std::set<std::pair<s, s>> edges = {
    {s::accepted, s::routed},       {s::accepted, s::failed},     {s::routed, s::prefilling},
    {s::routed, s::decoding},       {s::routed, s::failed},       {s::prefilling, s::transferring},
    {s::prefilling, s::decoding},   {s::prefilling, s::routed},   {s::prefilling, s::failed},
    {s::transferring, s::decoding}, {s::transferring, s::routed}, {s::transferring, s::failed},
    {s::decoding, s::done},         {s::decoding, s::failed},     {s::decoding, s::routed},
};

/// A lifecycle driven to `target` along allowed edges.
lifecycle at(s target) {
  lifecycle l;
  const s path[] = {s::routed, s::prefilling, s::transferring, s::decoding, s::done};
  if (target == s::failed) {
    REQUIRE(l.advance(s::failed));
    return l;
  }
  for (s next : path) {
    if (l.state() == target)
      break;
    REQUIRE(l.advance(next));
  }
  REQUIRE(l.state() == target);
  return l;
}

} // namespace

TEST_CASE("allowed() is exactly the documented machine") {
  for (s from : all_states)
    for (s to : all_states) {
      INFO(to_string(from) << " -> " << to_string(to));
      CHECK(lifecycle::allowed(from, to) == (edges.count({from, to}) == 1));
    }
}

TEST_CASE("advance takes every allowed edge and refuses every other, state unchanged") {
  for (s from : all_states)
    for (s to : all_states) {
      INFO(to_string(from) << " -> " << to_string(to));
      auto l = at(from);
      bool ok = l.advance(to);
      CHECK(ok == (edges.count({from, to}) == 1));
      CHECK(l.state() == (ok ? to : from));
    }
}

TEST_CASE("a sample of forbidden edges") {
  lifecycle l;
  CHECK_FALSE(l.advance(s::prefilling)); // not routed yet
  CHECK_FALSE(l.advance(s::decoding));
  CHECK_FALSE(l.advance(s::done));     // success needs decoding first
  CHECK_FALSE(l.advance(s::accepted)); // no self-loops
  CHECK(l.state() == s::accepted);
  auto d = at(s::decoding);
  CHECK_FALSE(d.advance(s::prefilling)); // a resume goes back through routing
  CHECK_FALSE(d.advance(s::transferring));
  CHECK_FALSE(d.advance(s::decoding));
  CHECK(d.state() == s::decoding);
}

TEST_CASE("done and failed are terminal and absorb everything, themselves included") {
  for (s end : {s::done, s::failed}) {
    auto l = at(end);
    CHECK(l.terminal());
    for (s to : all_states) {
      INFO(to_string(end) << " -> " << to_string(to));
      CHECK_FALSE(l.advance(to));
      CHECK(l.state() == end);
    }
  }
  for (s mid : {s::accepted, s::routed, s::prefilling, s::transferring, s::decoding})
    CHECK_FALSE(at(mid).terminal());
}

TEST_CASE("each entry to prefilling is one attempt, failover goes back through routed") {
  lifecycle l;
  CHECK(l.attempts() == 0);
  REQUIRE(l.advance(s::routed));
  CHECK(l.attempts() == 0);
  REQUIRE(l.advance(s::prefilling));
  CHECK(l.attempts() == 1);
  REQUIRE(l.advance(s::transferring));
  REQUIRE(l.advance(s::routed)); // failover: the transfer broke
  CHECK(l.attempts() == 1);
  REQUIRE(l.advance(s::prefilling));
  CHECK(l.attempts() == 2);
  REQUIRE(l.advance(s::routed));   // failover straight from prefilling
  REQUIRE(l.advance(s::decoding)); // the first attempt's KV arrived after all
  CHECK(l.attempts() == 2);
  REQUIRE(l.advance(s::done));
  CHECK(l.terminal());
  CHECK(l.attempts() == 2);
  CHECK_FALSE(l.advance(s::prefilling));
  CHECK(l.attempts() == 2);
}

TEST_CASE("every state has a name") {
  std::set<std::string> names;
  for (s x : all_states)
    names.insert(to_string(x));
  CHECK(names.size() == 7);
  CHECK(names.count("?") == 0);
  CHECK(std::string{to_string(s::transferring)} == "transferring");
}

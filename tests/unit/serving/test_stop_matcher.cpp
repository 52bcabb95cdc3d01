// Stop sequences over a token stream: what goes out, what is held back, where the
// output ends; and a seeded property test against a naive reference that searches
// the whole output for the first stop occurrence.

#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "decode/stop_matcher.hpp"

using prfaas::serving::stop_matcher;
using token = stop_matcher::token;
using tokens = std::vector<token>;

namespace {

tokens tok(const std::string& s) {
  return tokens(s.begin(), s.end());
}

struct run_result {
  tokens out;
  bool stopped = false;
  size_t consumed = 0; ///< tokens fed until the stop (all of them when none)
};

/// Feeds `input` until a stop, then flushes if none happened. Checks on the way that
/// every token fed is either sent or held, in order.
run_result run(stop_matcher& m, const tokens& input) {
  run_result r;
  for (token t : input) {
    bool stopped = true; // feed must reset it
    auto out = m.feed(t, stopped);
    r.out.insert(r.out.end(), out.begin(), out.end());
    ++r.consumed;
    if (stopped) {
      r.stopped = true;
      return r;
    }
    REQUIRE(r.out.size() + m.held() == r.consumed);
  }
  auto rest = m.flush();
  r.out.insert(r.out.end(), rest.begin(), rest.end());
  CHECK(m.held() == 0);
  return r;
}

run_result run(const std::vector<std::string>& stops, const std::string& input) {
  std::vector<tokens> s;
  for (auto& x : stops)
    s.push_back(tok(x));
  stop_matcher m{s};
  return run(m, tok(input));
}

/// The reference: output ends at the first position where some stop sequence ends;
/// when several end there, the longest is cut (no part of a stop sequence is sent).
run_result reference(const std::vector<tokens>& stops, const tokens& input) {
  for (size_t end = 1; end <= input.size(); ++end) {
    size_t cut = 0;
    bool hit = false;
    for (auto& s : stops)
      if (!s.empty() && s.size() <= end &&
          std::equal(s.begin(), s.end(), input.begin() + static_cast<long>(end - s.size())) &&
          (!hit || s.size() > cut)) {
        hit = true;
        cut = s.size();
      }
    if (hit)
      return {tokens(input.begin(), input.begin() + static_cast<long>(end - cut)), true, end};
  }
  return {input, false, input.size()};
}

} // namespace

TEST_CASE("without stop sequences every token passes straight through") {
  stop_matcher m;
  for (token t : {1, 2, 256, 3}) {
    bool stopped = true;
    CHECK(m.feed(t, stopped) == tokens{t});
    CHECK_FALSE(stopped);
    CHECK(m.held() == 0);
  }
  CHECK(m.flush().empty());
  // Empty stop sequences are the same as none.
  stop_matcher e{{{}, {}}};
  bool stopped = true;
  CHECK(e.feed(7, stopped) == tokens{7});
  CHECK_FALSE(stopped);
}

TEST_CASE("a single stop sequence ends the output before it") {
  auto r = run({"END"}, "abcENDxyz");
  CHECK(r.stopped);
  CHECK(r.out == tok("abc"));
  CHECK(r.consumed == 6);
  auto none = run({"END"}, "abcENxyz");
  CHECK_FALSE(none.stopped);
  CHECK(none.out == tok("abcENxyz"));
}

TEST_CASE("the first of several stop sequences to complete wins") {
  auto r = run({"ab", "cd"}, "xcdab");
  CHECK(r.stopped);
  CHECK(r.out == tok("x"));
  CHECK(r.consumed == 3);
  auto r2 = run({"ab", "cd"}, "xabcd");
  CHECK(r2.out == tok("x"));
  CHECK(r2.consumed == 3);
}

TEST_CASE("overlapping stop sequences") {
  // "abc" completes before "bcd" does.
  auto r = run({"abc", "bcd"}, "xabcd");
  CHECK(r.stopped);
  CHECK(r.out == tok("x"));
  CHECK(r.consumed == 4);
  // Only the second one is there.
  auto r2 = run({"abc", "bcd"}, "xbcd");
  CHECK(r2.stopped);
  CHECK(r2.out == tok("x"));
  // Neither: everything held back comes out.
  auto r3 = run({"abc", "bcd"}, "xabd");
  CHECK_FALSE(r3.stopped);
  CHECK(r3.out == tok("xabd"));
  // A stop that starts inside a failed attempt at itself.
  auto r4 = run({"aab"}, "aaab");
  CHECK(r4.stopped);
  CHECK(r4.out == tok("a"));
}

TEST_CASE("when two stop sequences end at the same token the longer is cut, in any order") {
  for (auto stops : {std::vector<std::string>{"c", "bc"}, std::vector<std::string>{"bc", "c"}}) {
    INFO(stops[0] << " " << stops[1]);
    auto r = run(stops, "abc");
    CHECK(r.stopped);
    CHECK(r.out == tok("a"));
  }
}

TEST_CASE("a stop sequence at the very first token sends nothing") {
  auto r = run({"x"}, "xyz");
  CHECK(r.stopped);
  CHECK(r.out.empty());
  CHECK(r.consumed == 1);
  auto r2 = run({"xy"}, "xyz");
  CHECK(r2.stopped);
  CHECK(r2.out.empty());
  CHECK(r2.consumed == 2);
}

TEST_CASE("held tokens are released by flush") {
  stop_matcher m{{tok("abc")}};
  bool stopped = false;
  CHECK(m.feed('z', stopped) == tok("z"));
  CHECK(m.feed('a', stopped).empty());
  CHECK(m.feed('b', stopped).empty());
  CHECK_FALSE(stopped);
  CHECK(m.held() == 2);
  CHECK(m.flush() == tok("ab"));
  CHECK(m.held() == 0);
  CHECK(m.flush().empty());
}

TEST_CASE("a partial match that fails releases the held tokens in order") {
  stop_matcher m{{tok("abcd")}};
  bool stopped = false;
  CHECK(m.feed('a', stopped).empty());
  CHECK(m.feed('b', stopped).empty());
  CHECK(m.feed('c', stopped).empty());
  CHECK(m.held() == 3);
  CHECK(m.feed('x', stopped) == tok("abcx"));
  CHECK_FALSE(stopped);
  CHECK(m.held() == 0);
  // A failed match whose tail starts a new one keeps just that tail.
  CHECK(m.feed('a', stopped).empty());
  CHECK(m.feed('b', stopped).empty());
  CHECK(m.feed('a', stopped) == tok("ab"));
  CHECK(m.held() == 1);
  CHECK(m.feed('b', stopped).empty());
  CHECK(m.feed('c', stopped).empty());
  CHECK(m.feed('d', stopped).empty());
  CHECK(stopped);
}

TEST_CASE("stop_matcher agrees with a naive search of the whole output (seeded)") {
  std::mt19937 rng{20240611};
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>{lo, hi}(rng); };
  for (int iter = 0; iter < 5000; ++iter) {
    const int alphabet = pick(2, 4); // small, so that stops overlap and repeat often
    std::vector<tokens> stops(pick(0, 4));
    for (auto& s : stops) {
      s.resize(pick(0, 5));
      for (auto& t : s)
        t = pick(0, alphabet - 1);
    }
    tokens input(pick(0, 40));
    for (auto& t : input)
      t = pick(0, alphabet - 1);

    stop_matcher m{stops};
    auto got = run(m, input);
    auto want = reference(stops, input);
    INFO("iteration " << iter);
    REQUIRE(got.stopped == want.stopped);
    REQUIRE(got.consumed == want.consumed);
    REQUIRE(got.out == want.out);
  }
}

// The hand-off from the gateway actor to an HTTP thread: order kept, one end only,
// nothing after the end, and a waiting reader woken from another thread.

#include <thread>

#include <catch2/catch.hpp>

#include "gateway/stream_channel.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;

namespace {
output_delta delta(std::vector<token> t) {
  output_delta d;
  d.tokens = std::move(t);
  return d;
}
} // namespace

TEST_CASE("pushed tokens come out in order, batched into one update") {
  stream_channel ch;
  ch.push(delta({1, 2}));
  ch.push(delta({}));
  ch.push(delta({3}));
  auto u = ch.next(0ms);
  REQUIRE(u);
  CHECK(u->out.tokens == std::vector<token>{1, 2, 3});
  CHECK_FALSE(u->finished);
  CHECK_FALSE(u->error);
  // Nothing new: an empty update after the wait, not the end.
  auto empty = ch.next(1ms);
  REQUIRE(empty);
  CHECK(empty->out.tokens.empty());
  CHECK_FALSE(empty->finished);
  CHECK_FALSE(ch.ended_for_reader());
}

TEST_CASE("finish ends the channel once, the last tokens travel with it") {
  stream_channel ch;
  ch.push(delta({7}));
  completion_summary s;
  s.finish_reason = "length";
  s.completion_tokens = 1;
  CHECK(ch.finish(s));
  CHECK_FALSE(ch.finish(s));
  CHECK_FALSE(ch.fail(api_error{.status = 500, .message = "late"}));
  ch.push(delta({8})); // after the end: dropped
  auto u = ch.next(0ms);
  REQUIRE(u);
  CHECK(u->out.tokens == std::vector<token>{7});
  REQUIRE(u->finished);
  CHECK(u->finished->finish_reason == "length");
  CHECK_FALSE(u->error);
  CHECK(ch.ended_for_reader());
  CHECK_FALSE(ch.next(0ms));
  CHECK_FALSE(ch.next(1ms));
}

TEST_CASE("fail ends the channel once with the error") {
  stream_channel ch;
  CHECK(ch.fail(api_error{.status = 503, .message = "no decode worker"}));
  CHECK_FALSE(ch.fail(api_error{.status = 500, .message = "second"}));
  CHECK_FALSE(ch.finish(completion_summary{}));
  auto u = ch.next(0ms);
  REQUIRE(u);
  REQUIRE(u->error);
  CHECK(u->error->status == 503);
  CHECK(u->error->message == "no decode worker");
  CHECK_FALSE(u->finished);
  CHECK_FALSE(ch.next(0ms));
}

TEST_CASE("abandon is seen by the actor side") {
  stream_channel ch;
  CHECK_FALSE(ch.abandoned());
  ch.abandon();
  CHECK(ch.abandoned());
}

TEST_CASE("a reader on another thread is woken and sees every token in order, then the end") {
  stream_channel ch;
  constexpr int n = 2000;
  std::vector<token> got;
  int ends = 0, empty = 0;
  std::thread reader([&] {
    // A wait far longer than the test: an update with nothing in it means the wait
    // ran out, i.e. a push or the finish did not wake the reader.
    while (auto u = ch.next(60s)) {
      if (u->out.tokens.empty() && !u->finished)
        ++empty;
      got.insert(got.end(), u->out.tokens.begin(), u->out.tokens.end());
      if (u->finished)
        ++ends;
    }
  });
  for (int i = 0; i < n; ++i) {
    ch.push(delta({i}));
    if (i % 100 == 0)
      std::this_thread::yield();
  }
  REQUIRE(ch.finish(completion_summary{}));
  reader.join();
  REQUIRE(got.size() == n);
  for (int i = 0; i < n; ++i)
    REQUIRE(got[i] == i);
  CHECK(ends == 1);
  CHECK(empty == 0);
}

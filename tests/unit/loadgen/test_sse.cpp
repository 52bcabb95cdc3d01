#include <random>

#include <catch2/catch.hpp>

#include "loadgen/sse.hpp"

using namespace prfaas::loadgen;

namespace {

std::vector<sse_event> feed_in_pieces(const std::string& stream, const std::vector<size_t>& cuts) {
  sse_parser p;
  std::vector<sse_event> out;
  size_t at = 0;
  for (size_t cut : cuts) {
    p.feed(std::string_view{stream}.substr(at, cut - at), out);
    at = cut;
  }
  p.feed(std::string_view{stream}.substr(at), out);
  return out;
}

const std::string stream = "\xEF\xBB\xBF"
                           ": keep-alive\n\n"
                           "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                           "data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"
                           "data: l1\r\ndata: l2\r\n\r\n"
                           "event: note\r"
                           "data:first\r"
                           "data:  second\r\r"
                           "id: 7\n"
                           "data: {\"error\": {\"message\": \"engine lost\"}}\n"
                           "\n"
                           "retry: 100\n\n"
                           "data: [DONE]\n\n";

const std::vector<sse_event> expected = {
    {"", R"({"choices":[{"text":"a"}]})", ""},
    {"", R"({"choices":[{"text":"b"}]})", ""},
    {"", "l1\nl2", ""},
    {"note", "first\n second", ""},
    {"", R"({"error": {"message": "engine lost"}})", "7"},
    {"", "[DONE]", ""},
};

} // namespace

TEST_CASE("sse: a whole stream gives its events") {
  CHECK(feed_in_pieces(stream, {}) == expected);
}

TEST_CASE("sse: every split of the stream gives the same events") {
  for (size_t i = 1; i < stream.size(); ++i)
    REQUIRE(feed_in_pieces(stream, {i}) == expected);
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < stream.size(); ++i)
    every_byte.push_back(i);
  CHECK(feed_in_pieces(stream, every_byte) == expected);
  std::mt19937_64 rng{99};
  for (int round = 0; round < 500; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < stream.size(); ++i)
      if (rng() % 7 == 0)
        cuts.push_back(i);
    REQUIRE(feed_in_pieces(stream, cuts) == expected);
  }
}

TEST_CASE("sse: a stream cut mid-event leaves it pending, never dispatched") {
  sse_parser p;
  std::vector<sse_event> out;
  p.feed("data: {\"a\":1}\n\ndata: {\"b\"", out);
  CHECK(out.size() == 1);
  CHECK(p.partial());
  p.feed(":2}\n", out);
  CHECK(out.size() == 1); // the line ended, the event did not
  CHECK(p.partial());
  p.feed("\n", out);
  REQUIRE(out.size() == 2);
  CHECK(out[1].data == R"({"b":2})");
  CHECK_FALSE(p.partial());
}

TEST_CASE("sse: events without data are dropped, a BOM only counts at the start") {
  sse_parser p;
  std::vector<sse_event> out;
  p.feed("event: ping\n\n\xEF\xBB\xBF"
         "data: x\n\n",
         out);
  // A BOM after the start is text: it becomes part of the field name and is ignored.
  CHECK(out.empty());
  sse_parser q;
  q.feed("\xEF\xBB"
         "data: y\n\n",
         out); // not a full BOM: the bytes stay in the line
  CHECK(out.empty());
  sse_parser r;
  r.feed("data: z\n\n", out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "z");
}

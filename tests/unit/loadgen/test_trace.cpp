#include <algorithm>
#include <map>
#include <sstream>

#include <catch2/catch.hpp>

#include "loadgen/trace.hpp"

using namespace prfaas::loadgen;

namespace {

std::vector<trace_record> parse(const std::string& text) {
  std::istringstream in{text};
  return parse_trace(in, "t.jsonl");
}

size_t error_line(const std::string& text) {
  try {
    parse(text);
  } catch (const trace_error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("t.jsonl:" + std::to_string(e.line()) + ": "));
    return e.line();
  }
  return 0;
}

const std::string good =
    R"({"timestamp": 0, "input_length": 1100, "output_length": 7, "hash_ids": [1, 2, 3]})";

} // namespace

TEST_CASE("trace: records parse, blank lines are skipped") {
  auto rs =
      parse(good + "\n\n" +
            R"({"timestamp": 1500.5, "input_length": 10, "output_length": 0, "hash_ids": [9]})"
            "\r\n");
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].input_length == 1100);
  CHECK(rs[0].output_length == 7);
  CHECK(rs[0].hash_ids == std::vector<uint64_t>{1, 2, 3});
  CHECK(rs[1].timestamp_ms == 1500.5);
}

TEST_CASE("trace: a bad line is reported with its file and line number") {
  CHECK(error_line(good + "\nnot json\n") == 2);
  CHECK(error_line(good + "\n\n" + good +
                   "\n{\"timestamp\": 5, \"output_length\": 1, "
                   "\"hash_ids\": []}\n") == 4);
  CHECK(error_line(R"({"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []})") ==
        1);
  CHECK(error_line(good + "\n" +
                   R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 3})") ==
        2);
  CHECK(error_line(
            good + "\n" + good + "\n" +
            R"({"timestamp": "x", "input_length": 5, "output_length": 1, "hash_ids": []})") == 3);
  CHECK(error_line(good + "\n[1, 2]\n") == 2);
  CHECK_THROWS_WITH(parse(good + "\n{\"timestamp\": 1,"),
                    Catch::StartsWith("t.jsonl:2: not valid JSON"));
  CHECK_THROWS_WITH(load_trace("/nonexistent/x.jsonl"),
                    Catch::StartsWith("/nonexistent/x.jsonl:0: cannot open"));
}

TEST_CASE("trace: replay scales time, caps lengths and keeps blocks aligned") {
  std::vector<trace_record> rs = {
      {1000, 1100, 7, {1, 2, 3}},
      {3000, 2000, 5000, {1, 2, 4, 5}},
      {2000, 600, 3, {1, 6}}, // out of order: replay sorts by time
  };
  trace_options o;
  o.time_scale = 0.5;
  o.max_output = 1024;
  trace_workload w{rs, o};
  REQUIRE(w.size() == 3u);
  auto a = *w.next(), b = *w.next(), c = *w.next();
  CHECK_FALSE(w.next());
  CHECK(a.arrival_s == 0);
  CHECK(b.arrival_s == Approx(0.5)); // (2000 - 1000) ms * 0.5
  CHECK(c.arrival_s == Approx(1.0));
  CHECK(b.input_tokens == 600);
  CHECK(c.output_tokens == 1024); // capped
  CHECK(prompt_text(a).size() == 1100);
  // Blocks 1 and 2 are shared by a and c: their first 1024 bytes agree, block 3 differs.
  auto pa = prompt_text(a), pc = prompt_text(c);
  CHECK(pa.substr(0, 1024) == pc.substr(0, 1024));
  CHECK(pa.substr(1024, 76) != pc.substr(1024, 76));

  trace_options capped;
  capped.max_input = 700;
  capped.output_len = 64;
  trace_workload wc{rs, capped, {2, 0}};
  CHECK(wc.size() == 2u); // --limit
  auto x = *wc.next();
  CHECK(x.input_tokens == 700);
  CHECK(x.hash_ids == std::vector<uint64_t>{1, 2}); // trailing block cut
  CHECK(x.output_tokens == 64);
  CHECK(wc.next());
  CHECK_FALSE(wc.next());

  trace_options half;
  half.input_scale = 0.5;
  trace_workload wh{rs, half};
  auto h = *wh.next();
  CHECK(h.input_tokens == 550);
  CHECK(h.block_tokens == 256);
  CHECK(h.hash_ids.size() == 3);
  CHECK(prompt_text(h).substr(0, 256) == pa.substr(0, 256)); // block 1's text, shorter
}

TEST_CASE("trace: the Mooncake synthetic trace parses and replays exactly") {
  auto rs = load_trace(PRFAAS_MOONCAKE_TRACE);
  REQUIRE(rs.size() == 3993);
  CHECK(rs[0].timestamp_ms == 0);
  CHECK(rs[0].input_length == 40160);
  CHECK(rs[0].output_length == 6);
  REQUIRE(rs[0].hash_ids.size() == 79);
  CHECK(rs[0].hash_ids.front() == 0);
  CHECK(rs[0].hash_ids.back() == 78);
  double sum = 0;
  for (auto& r : rs)
    sum += r.input_length;
  CHECK(sum / rs.size() == Approx(15325).margin(1)); // data/traces/README.md: average input 15,325

  trace_workload w{rs, {}};
  size_t shared_pairs = 0;
  std::map<uint64_t, std::pair<request_spec, std::string>> first_with; // by first hash id
  while (auto r = w.next()) {
    auto p = prompt_text(*r);
    REQUIRE(p.size() == r->input_tokens);
    REQUIRE(r->input_tokens == rs[r->index].input_length);
    auto [it, fresh] = first_with.try_emplace(r->hash_ids.at(0), *r, p);
    if (fresh)
      continue;
    // Same first block: every leading block with equal ids has equal text.
    const auto& [other, op] = it->second;
    size_t k = 0;
    while (k < r->hash_ids.size() && k < other.hash_ids.size() &&
           r->hash_ids[k] == other.hash_ids[k])
      ++k;
    size_t common = std::min({k * 512, p.size(), op.size()});
    REQUIRE(p.compare(0, common, op, 0, common) == 0);
    if (k < r->hash_ids.size() && k < other.hash_ids.size() && (k + 1) * 512 <= p.size() &&
        (k + 1) * 512 <= op.size())
      REQUIRE(p.compare(k * 512, 512, op, k * 512, 512) != 0);
    ++shared_pairs;
  }
  CHECK(shared_pairs > 100); // multi-turn conversations share prefixes
}

// A request's output as text: incremental detokenization that never splits a UTF-8
// character, stop strings matched on the text (held back while they may be starting,
// never sent in part), and tokens and log-probabilities attached to the text they begin.

#include <random>

#include <catch2/catch.hpp>

#include "gateway/output_text.hpp"

using namespace prfaas::serving;
namespace engine = prfaas::engine;

namespace {

/// A vocabulary of whole pieces, to put several bytes (or a stop string) in one token.
class piece_tokenizer final : public engine::tokenizer {
public:
  explicit piece_tokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  uint32_t vocab_size() const override { return static_cast<uint32_t>(pieces_.size()); }
  bool is_end(token) const override { return false; }
  engine::result<std::vector<token>> tokenize(std::string_view, bool, bool) const override {
    return std::vector<token>{};
  }
  std::string piece(token t) const override { return pieces_.at(static_cast<size_t>(t)); }
  engine::result<std::string> chat_prompt(std::span<const engine::chat_message>) const override {
    return std::string{};
  }
  bool chat_has_special() const override { return false; }

private:
  std::vector<std::string> pieces_;
};

std::shared_ptr<const engine::tokenizer> bytes() {
  static auto t = std::make_shared<const engine::byte_tokenizer>();
  return t;
}

output_delta feed_all(output_text& o, const std::string& s) {
  output_delta all;
  for (unsigned char c : s)
    all.append(o.feed(c, nullptr));
  return all;
}

} // namespace

TEST_CASE("text flows through token by token, each token with the text it begins") {
  output_text o(bytes(), {}, false);
  auto a = o.feed('h', nullptr);
  CHECK(a.text == "h");
  CHECK(a.tokens == std::vector<token>{'h'});
  auto b = o.feed('i', nullptr);
  CHECK(b.text == "i");
  CHECK(o.finish().empty());
  CHECK(o.tokens() == 2);
  CHECK_FALSE(o.stopped());
}

TEST_CASE("a UTF-8 character split over tokens comes out whole") {
  output_text o(bytes(), {}, false);
  // U+20AC is E2 82 AC: nothing until its last byte.
  CHECK(o.feed(0xE2, nullptr).empty());
  CHECK(o.feed(0x82, nullptr).empty());
  auto d = o.feed(0xAC, nullptr);
  CHECK(d.text == "\xe2\x82\xac");
  CHECK(d.tokens == std::vector<token>{0xE2, 0x82, 0xAC});
  // A byte that can never start a character is U+FFFD at once, not held.
  CHECK(o.feed(0xFF, nullptr).text == "\xef\xbf\xbd");
  // A character cut off by the end of the output is U+FFFD too.
  CHECK(o.feed(0xC3, nullptr).empty());
  auto end = o.finish();
  CHECK(end.text == "\xef\xbf\xbd");
  CHECK(end.tokens == std::vector<token>{0xC3});
}

TEST_CASE("a stop string across tokens ends the output where it begins, never sent in part") {
  output_text o(bytes(), {"bc"}, false);
  CHECK(o.feed('a', nullptr).text == "a");
  auto held = o.feed('b', nullptr); // could be the start of "bc"
  CHECK(held.empty());
  auto stop = o.feed('c', nullptr);
  CHECK(stop.empty());
  CHECK(o.stopped());
  CHECK(o.tokens() == 3);              // the stop string's tokens count as generated
  CHECK(o.feed('d', nullptr).empty()); // nothing after the end
  CHECK(o.finish().empty());
  CHECK(o.tokens() == 3);
}

TEST_CASE("held-back text is released once it cannot be a stop string") {
  output_text o(bytes(), {"bc"}, false);
  CHECK(o.feed('b', nullptr).empty());
  auto d = o.feed('d', nullptr);
  CHECK(d.text == "bd");
  CHECK(d.tokens == std::vector<token>{'b', 'd'});
  // At the end of the output (length, EOS) a held prefix goes out.
  CHECK(o.feed('b', nullptr).empty());
  CHECK(o.finish().text == "b");
  CHECK_FALSE(o.stopped());
}

TEST_CASE("the earliest of several stop strings wins, even inside one token") {
  piece_tokenizer t({"xy\nz", "STOPw", "w"});
  auto tok = std::shared_ptr<const engine::tokenizer>(&t, [](auto*) {});
  {
    output_text o(tok, {"z", "\n"}, false);
    auto d = o.feed(0, nullptr);
    CHECK(d.text == "xy");
    CHECK(d.tokens == std::vector<token>{0}); // its text begins before the stop
    CHECK(o.stopped());
  }
  {
    output_text o(tok, {"STOP"}, false);
    CHECK(o.feed(2, nullptr).text == "w");
    auto d = o.feed(1, nullptr);
    CHECK(d.empty()); // the token begins with the stop string: none of it is output
    CHECK(o.stopped());
    CHECK(o.tokens() == 2);
  }
}

TEST_CASE("log-probabilities go with their tokens, with the tokens' texts and offsets") {
  output_text o(bytes(), {}, true);
  engine::sampled_logprobs a{{'a', -0.5f}, {{'a', -0.5f}, {'b', -2.0f}}};
  engine::sampled_logprobs e1{{0xC3, -0.25f}, {}};
  engine::sampled_logprobs e2{{0xA9, -0.125f}, {}};
  auto d = o.feed('a', &a);
  REQUIRE(d.logprobs.size() == 1);
  CHECK(d.logprobs[0].token == "a");
  CHECK(d.logprobs[0].logprob == -0.5f);
  CHECK(d.logprobs[0].top ==
        std::vector<std::pair<std::string, float>>{{"a", -0.5f}, {"b", -2.0f}});
  CHECK(d.logprobs[0].text_offset == 0);
  CHECK(o.feed(0xC3, &e1).empty());
  auto d2 = o.feed(0xA9, &e2);
  REQUIRE(d2.logprobs.size() == 2);
  CHECK(d2.logprobs[0].token == "\xc3");
  CHECK(d2.logprobs[0].text_offset == 1);
  CHECK(d2.logprobs[1].text_offset == 1); // mid-character: where the character begins
  // Without the flag, none are made.
  output_text quiet(bytes(), {}, false);
  CHECK(quiet.feed('a', &a).logprobs.empty());
}

TEST_CASE("any token stream: the output is the text before the first stop string, in any pieces") {
  std::mt19937 rng(42);
  const std::string alphabet = "ab\xc3\xa9 \n";
  for (int round = 0; round < 500; ++round) {
    std::string stream;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i)
      stream.push_back(alphabet[rng() % alphabet.size()]);
    // Stop strings come from JSON: whole characters.
    const std::vector<std::string> chars = {"a", "b", "\xc3\xa9", " ", "\n"};
    std::vector<std::string> stops;
    for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
      std::string s;
      for (int i = 1 + static_cast<int>(rng() % 3); i > 0; --i)
        s += chars[rng() % chars.size()];
      stops.push_back(s);
    }
    size_t cut = std::string::npos;
    for (auto& s : stops)
      cut = std::min(cut, stream.find(s));
    const std::string want = engine::utf8_sanitize(stream.substr(0, cut));
    INFO("stream '" << stream << "' stops " << stops.size());
    output_text o(bytes(), stops, false);
    auto got = feed_all(o, stream);
    got.append(o.finish());
    CHECK(got.text == want);
    CHECK(o.stopped() == (cut != std::string::npos));
    // Every token whose byte begins the released text is reported, in order.
    const size_t released = cut == std::string::npos ? stream.size() : cut;
    CHECK(got.tokens.size() == released);
  }
}

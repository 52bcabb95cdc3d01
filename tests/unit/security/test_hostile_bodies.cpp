// Request bodies the fuzzer found or a hostile client would send: each is a clear 4xx
// from parse_completion, never an exception (which the HTTP layer would turn into 500).

#include <catch2/catch.hpp>

#include "gateway/openai.hpp"

using namespace prfaas::serving;

namespace {

const api_limits limits{.model = "m",
                        .max_context = 4096,
                        .max_prompt_tokens = 100,
                        .max_output_tokens = 512,
                        .default_max_tokens = 16};
const prfaas::engine::byte_tokenizer bytes;

int status_of(const std::string& body, bool chat = false) {
  auto r = parse_completion(body, chat, limits, bytes);
  auto* e = std::get_if<api_error>(&r);
  return e ? e->status : 200;
}

} // namespace

TEST_CASE("a number too large for a double is a 400 naming the body") {
  // Found by fuzz/fuzz_http_request: nlohmann's parser throws out_of_range here.
  auto r =
      parse_completion(R"({"model": 6666666666666666E66666, "prompt": "x"})", false, limits, bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  CHECK(std::get<api_error>(r).status == 400);
  CHECK_THAT(std::get<api_error>(r).message, Catch::Matchers::Contains("not valid JSON"));
  CHECK(status_of(R"({"model": "m", "prompt": "x", "max_tokens": 1e400})") == 400);
}

TEST_CASE("the prompt and max_tokens limits hold for prompts and conversations") {
  CHECK(status_of(R"({"model": "m", "prompt": ")" + std::string(100, 'a') + R"("})") == 200);
  CHECK(status_of(R"({"model": "m", "prompt": ")" + std::string(101, 'a') + R"("})") == 413);
  CHECK(status_of(R"({"model": "m", "messages": [{"role": "user", "content": ")" +
                      std::string(100, 'a') + R"("}]})",
                  true) == 413); // the template counts too
  CHECK(status_of(R"({"model": "m", "prompt": "x", "max_tokens": 513})") == 400);
  CHECK(status_of(R"({"model": "m", "prompt": "x", "max_tokens": -1})") == 400);
  CHECK(status_of(std::string(10000, '[')) == 400); // deep nesting: a parse error, not a crash
}

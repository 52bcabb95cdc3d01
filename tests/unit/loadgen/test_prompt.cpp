#include <catch2/catch.hpp>

#include "loadgen/prompt.hpp"
#include "loadgen/workload.hpp"

using namespace prfaas::loadgen;

namespace {

bool json_safe_printable(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
      return false;
  return true;
}

} // namespace

TEST_CASE("prompt: exactly L printable JSON-safe bytes, a function of the seed") {
  for (size_t len : {0u, 1u, 9u, 10u, 11u, 512u, 131072u}) {
    auto s = random_text(123, len);
    CHECK(s.size() == len);
    CHECK(json_safe_printable(s));
  }
  CHECK(random_text(5, 1000) == random_text(5, 1000));
  CHECK(random_text(5, 1000) != random_text(6, 1000));
  CHECK(random_text(5, 100) == random_text(5, 1000).substr(0, 100));
}

TEST_CASE("prompt: equal hash ids give identical blocks wherever they sit") {
  auto a = block_prompt({5, 6, 7}, 1200, 512, 1);
  auto b = block_prompt({9, 6, 7}, 1100, 512, 2);
  REQUIRE(a.size() == 1200);
  REQUIRE(b.size() == 1100);
  CHECK(json_safe_printable(a));
  CHECK(a.substr(0, 512) != b.substr(0, 512));     // 5 vs 9
  CHECK(a.substr(512, 512) == b.substr(512, 512)); // 6
  CHECK(a.substr(1024, 76) == b.substr(1024, 76)); // 7, partial in both
  CHECK(a.substr(0, 512) == block_text(5, 512));
  auto c = block_prompt({1, 5}, 1024, 512, 3); // id 5 as the second block
  CHECK(c.substr(512) == block_text(5, 512));
}

TEST_CASE("prompt: blocks past the hash ids are filled with request-unique text") {
  auto a = block_prompt({1}, 1536, 512, 10);
  auto b = block_prompt({1}, 1536, 512, 11);
  REQUIRE(a.size() == 1536);
  CHECK(a.substr(0, 512) == b.substr(0, 512));
  CHECK(a.substr(512) != b.substr(512));
  CHECK(a == block_prompt({1}, 1536, 512, 10));
  CHECK(a.substr(512, 512) != block_text(10, 512)); // fill never equals an id's block
}

TEST_CASE("prompt: a synthetic request's text has its input length") {
  request_spec r;
  r.input_tokens = 4097;
  r.prompt_seed = 77;
  auto p = prompt_text(r);
  CHECK(p.size() == 4097);
  r.prompt_seed = 78;
  CHECK(prompt_text(r) != p);
}

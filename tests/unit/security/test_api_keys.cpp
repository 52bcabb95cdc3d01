// The gateway's API keys as a plain class: who gets in, what a refusal says, and how
// many requests a key may have in flight.

#include <catch2/catch.hpp>

#include "gateway/api_keys.hpp"
#include "support/process.hpp"

using prfaas::serving::api_error;
using prfaas::serving::api_key_guard;
using prfaas::serving::api_slot;

namespace {

/// The status a header value gets (200 = let in).
int status_of(const api_key_guard& g, std::string_view header) {
  auto r = g.authenticate(header);
  auto* e = std::get_if<api_error>(&r);
  return e ? e->status : 200;
}

} // namespace

TEST_CASE("without keys the gateway is open") {
  api_key_guard g{{}, 0};
  CHECK_FALSE(g.enabled());
  CHECK(status_of(g, "") == 200);
  CHECK(status_of(g, "Bearer anything") == 200);
}

TEST_CASE("with keys only a configured bearer key gets in") {
  api_key_guard g{{"sk-alpha", "sk-beta"}, 0};
  CHECK(status_of(g, "Bearer sk-alpha") == 200);
  CHECK(std::get<std::string>(g.authenticate("Bearer sk-beta")) == "sk-beta");
  CHECK(status_of(g, "bearer sk-beta") == 200); // the scheme is case-insensitive
  CHECK(status_of(g, "  Bearer  sk-alpha ") == 200);
  CHECK(status_of(g, "") == 401);
  CHECK(status_of(g, "Bearer ") == 401);
  CHECK(status_of(g, "Bearer sk-alph") == 401); // a prefix is not the key
  CHECK(status_of(g, "Bearer sk-alphaa") == 401);
  CHECK(status_of(g, "Basic sk-alpha") == 401);
  CHECK(status_of(g, "sk-alpha") == 401);
  auto e = std::get<api_error>(g.authenticate(""));
  CHECK(e.code == "invalid_api_key");
  CHECK(e.body()["error"]["message"].get<std::string>().find("didn't provide") !=
        std::string::npos);
  auto wrong = std::get<api_error>(g.authenticate("Bearer nope"));
  CHECK(wrong.body()["error"]["message"] == "Incorrect API key provided.");
}

TEST_CASE("a key may have at most max_concurrent_per_key requests in flight") {
  api_key_guard g{{"a", "b"}, 2};
  auto s1 = g.acquire("a");
  auto s2 = g.acquire("a");
  REQUIRE(std::holds_alternative<api_slot>(s1));
  REQUIRE(std::holds_alternative<api_slot>(s2));
  CHECK(g.in_flight("a") == 2);
  auto s3 = g.acquire("a");
  REQUIRE(std::holds_alternative<api_error>(s3));
  CHECK(std::get<api_error>(s3).status == 429);
  CHECK(std::get<api_error>(s3).retry_after_s > 0);
  // Another key is not affected.
  CHECK(std::holds_alternative<api_slot>(g.acquire("b")));
  // A slot is given back when its holder lets go, even if copies were made.
  auto copy = std::get<api_slot>(s1);
  s1 = api_slot{};
  CHECK(g.in_flight("a") == 2);
  copy.reset();
  CHECK(g.in_flight("a") == 1);
  CHECK(std::holds_alternative<api_slot>(g.acquire("a")));
}

TEST_CASE("without a per-key limit slots are only counted") {
  api_key_guard g{{}, 0};
  std::vector<std::variant<api_slot, api_error>> held;
  for (int i = 0; i < 100; ++i)
    held.push_back(g.acquire(""));
  for (auto& h : held)
    CHECK(std::holds_alternative<api_slot>(h));
  CHECK(g.in_flight("") == 100);
}

TEST_CASE("an API keys file holds one key per line") {
  prfaas::test::temp_dir dir{"prfaas-api-keys"};
  auto f = dir.file("keys", "# team keys\nsk-one\n\n  sk-two  \r\n#sk-old\n");
  auto keys = prfaas::serving::read_api_keys_file(f.string());
  CHECK(keys == std::vector<std::string>{"sk-one", "sk-two"});
  CHECK_THROWS_WITH(prfaas::serving::read_api_keys_file((dir.path() / "none").string()),
                    Catch::Matchers::Contains("cannot read API keys file"));
}

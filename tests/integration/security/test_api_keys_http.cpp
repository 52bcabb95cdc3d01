// The gateway's API keys and limits over real HTTP, against a real prfaas-node (the
// whole serving path, reference engine): 401 without or with a wrong key, /health and
// /metrics open, the size limits with a key, and one request in flight per key.

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
using namespace prfaas::test;

namespace {

const std::string model = "prfaas-ref-hybrid";

/// One node with the serving path and a gateway that wants keys. The node process is
/// killed and reaped with the fixture (child_process does that).
struct secured_gateway {
  temp_dir dir{"prfaas-api-keys"};
  std::vector<uint16_t> ports = free_ports(3);
  int http_port = ports[2];
  std::filesystem::path log = dir.path() / "node.log";
  std::unique_ptr<child_process> proc;

  secured_gateway() {
    auto p = [&](size_t i) { return std::to_string(ports[i]); };
    auto keys_file = dir.file("more-keys", "# one per line\nsk-file\n");
    std::string yaml =
        "deployment: api-keys\n"
        "model:\n"
        "  name: " +
        model +
        "\n"
        "  engine: reference\n"
        "  block_tokens: 64\n"
        "  max_context: 8192\n"
        "  reference: { weight_seed: 1, layer_pattern: LLLFLLLF }\n"
        "clusters:\n"
        "  pd: { kind: pd }\n"
        "nodes:\n"
        "  - name: pd-0\n"
        "    cluster: pd\n"
        "    control: tcp://127.0.0.1:" +
        p(0) +
        "\n"
        "    data: tcp://127.0.0.1:" +
        p(1) +
        "\n"
        "    actors:\n"
        "      - { type: scheduler, name: sched, policy: threshold, threshold: 100000 }\n"
        "      - { type: prefill_worker, name: pdp0 }\n"
        "      - { type: decode_worker, name: d0, max_batch: 4 }\n"
        "      - type: gateway\n"
        "        name: gw\n"
        "        listen: 127.0.0.1:" +
        p(2) +
        "\n"
        "        api_keys: [sk-alpha, sk-beta]\n"
        "        api_keys_file: " +
        keys_file.string() +
        "\n"
        "        max_concurrent_per_key: 1\n"
        "        max_prompt_tokens: 100\n"
        "        max_output_tokens: 8000\n"
        "        max_body: 4KiB\n";
    auto config = dir.file("deployment.yaml", yaml);
    proc = std::make_unique<child_process>(command{
        {PRFAAS_BIN_DIR "/prfaas-node", "--config", config.string(), "--node", "pd-0"}, {}, log});
  }

  httplib::Client client(const std::string& key = {}) const {
    httplib::Client cli{"127.0.0.1", http_port};
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(60, 0);
    if (!key.empty())
      cli.set_bearer_token_auth(key.c_str());
    return cli;
  }
};

std::string completion(const std::string& prompt, int max_tokens, bool stream = false) {
  return json{{"model", model},   {"prompt", prompt},   {"max_tokens", max_tokens},
              {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

/// Status and error.code of a POST /v1/completions.
std::pair<int, std::string> post(const secured_gateway& g, const std::string& key,
                                 const std::string& body) {
  auto res = g.client(key).Post("/v1/completions", body, "application/json");
  if (!res)
    return {-1, httplib::to_string(res.error())};
  auto j = json::parse(res->body, nullptr, false);
  std::string code = j.is_object() && j.contains("error") && j["error"]["code"].is_string()
                         ? j["error"]["code"].get<std::string>()
                         : std::string{};
  return {res->status, code};
}

} // namespace

TEST_CASE("the gateway wants a configured API key on /v1 and enforces its limits") {
  secured_gateway g;
  std::string last;
  bool ready = eventually(
      [&] {
        auto [status, code] = post(g, "sk-alpha", completion("hello", 4));
        last = std::to_string(status) + " " + code;
        return status == 200;
      },
      60s, 200ms);
  INFO("last attempt: " << last << "\nnode log:\n" << read_file(g.log));
  REQUIRE(ready);

  SECTION("no key, a wrong key, another scheme: 401 in OpenAI's shape") {
    auto res = g.client().Get("/v1/models");
    REQUIRE(res);
    CHECK(res->status == 401);
    CHECK(res->get_header_value("WWW-Authenticate") == "Bearer");
    auto body = json::parse(res->body);
    CHECK(body["error"]["code"] == "invalid_api_key");
    CHECK(body["error"]["type"] == "invalid_request_error");
    CHECK(post(g, "", completion("hello", 4)) ==
          std::pair<int, std::string>{401, "invalid_api_key"});
    CHECK(post(g, "sk-gamma", completion("hello", 4)).first == 401);
    httplib::Headers basic{{"Authorization", "Basic c2stYWxwaGE6"}};
    auto r = g.client().Post("/v1/completions", basic, completion("hello", 4), "application/json");
    REQUIRE(r);
    CHECK(r->status == 401);
    // Refused before the body is read: an oversized body without a key is 401, not 413.
    CHECK(post(g, "", std::string(64 * 1024, ' ')).first == 401);
  }

  SECTION("keys from the list and from the file get in; probes stay open") {
    CHECK(post(g, "sk-beta", completion("hello", 4)).first == 200);
    CHECK(post(g, "sk-file", completion("hello", 4)).first == 200);
    auto models = g.client("sk-beta").Get("/v1/models");
    REQUIRE(models);
    CHECK(models->status == 200);
    for (const char* path : {"/health", "/metrics"}) {
      auto res = g.client().Get(path);
      REQUIRE(res);
      CHECK(res->status == 200);
    }
  }

  SECTION("limits with a key: prompt length, max_tokens, body size") {
    CHECK(post(g, "sk-alpha", completion(std::string(101, 'x'), 4)) ==
          std::pair<int, std::string>{413, "context_length_exceeded"});
    CHECK(post(g, "sk-alpha", completion(std::string(100, 'x'), 4)).first == 200);
    CHECK(post(g, "sk-alpha", completion("hello", 8001)).first == 400);
    CHECK(
        post(g, "sk-alpha", completion(std::string(3000, 'x') + std::string(2000, 'y'), 4)).first ==
        413);
  }

  SECTION("one request in flight per key: the second gets 429, another key does not") {
    std::pair<int, std::string> same_key{0, ""}, other_key{0, ""};
    std::string retry_after;
    bool checked = false;
    auto cli = g.client("sk-alpha");
    // A long stream holds sk-alpha's one slot; while its first tokens arrive, ask again.
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = completion("hello", 7000, true);
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      if (!checked) {
        checked = true;
        auto second =
            g.client("sk-alpha").Post("/v1/completions", completion("hi", 4), "application/json");
        if (second) {
          same_key = {second->status, ""};
          retry_after = second->get_header_value("Retry-After");
        }
        other_key = post(g, "sk-beta", completion("hi", 4));
      }
      return true;
    };
    auto res = cli.send(req);
    REQUIRE(res);
    CHECK(res->status == 200);
    REQUIRE(checked);
    CHECK(same_key.first == 429);
    CHECK_FALSE(retry_after.empty());
    CHECK(other_key.first == 200);
    // The stream is over: its slot is free again.
    CHECK(eventually([&] { return post(g, "sk-alpha", completion("hello", 4)).first == 200; }, 10s,
                     50ms));
  }
}

// A real prfaas-node (scheduler, prefill and decode workers, gateway, reference
// engine) behind real HTTP, fed a table of bad requests: each gets its status and an
// OpenAI error body naming the problem, and after each one the gateway still serves
// a good request. Plus the read-only endpoints: /v1/models, /health, /metrics.

#include <csignal>
#include <functional>
#include <optional>

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/http_probe.hpp"
#include "support/process.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
using namespace prfaas::test;
using Catch::Matchers::Contains;

namespace {

const std::string model = "prfaas-ref-hybrid";
constexpr size_t max_body = 64 * 1024;

/// One node with the whole serving path; the gateway on a free port.
struct node {
  temp_dir dir{"prfaas-bad-input"};
  int http_port = 0;
  std::filesystem::path log = dir.path() / "node.log";
  std::unique_ptr<child_process> proc;

  node() {
    auto ports = free_ports(4);
    http_port = ports[3];
    auto p = [&](size_t i) { return std::to_string(ports[i]); };
    std::string yaml =
        "deployment: bad-input\n"
        "log_level: info\n"
        "seed: 1\n"
        "model:\n"
        "  name: " +
        model +
        "\n"
        "  engine: reference\n"
        "  block_tokens: 64\n"
        "  max_context: 2048\n"
        "  reference: { weight_seed: 1, layer_pattern: LLLFLLLF }\n"
        "clusters:\n"
        "  pd: { kind: pd }\n"
        "failure_detector: { interval: 200ms, misses: 5, suspect_misses: 2 }\n"
        "nodes:\n"
        "  - name: pd-0\n"
        "    cluster: pd\n"
        "    control: tcp://127.0.0.1:" +
        p(0) +
        "\n"
        "    data: tcp://127.0.0.1:" +
        p(1) +
        "\n"
        "    admin: 127.0.0.1:" +
        p(2) +
        "\n"
        "    actors:\n"
        "      - { type: scheduler, name: sched, policy: threshold, threshold: 256 }\n"
        "      - { type: prefill_worker, name: pdp0 }\n"
        "      - { type: decode_worker, name: d0, max_batch: 4 }\n"
        "      - { type: gateway, name: gw, listen: 127.0.0.1:" +
        p(3) + ", max_body: 64KiB }\n";
    auto config = dir.file("deployment.yaml", yaml);
    proc = std::make_unique<child_process>(command{
        {PRFAAS_BIN_DIR "/prfaas-node", "--config", config.string(), "--node", "pd-0"}, {}, log});
  }

  ~node() {
    if (proc && proc->running()) {
      proc->signal(SIGTERM);
      proc->wait(10s);
    }
  }

  std::string logs() const { return read_file(log); }

  httplib::Client client() const {
    httplib::Client cli{"127.0.0.1", http_port};
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(60, 0);
    cli.set_write_timeout(10, 0);
    return cli;
  }
};

const std::string good_body = json{{"model", model},     {"prompt", "The quick brown fox"},
                                   {"max_tokens", 8},    {"temperature", 0},
                                   {"ignore_eos", true}, {"return_token_ids", true}}
                                  .dump();

/// A valid non-streaming completion; empty when it did not succeed. `why` says how not.
std::optional<json> good_completion(const node& n, std::string& why) {
  auto cli = n.client();
  auto res = cli.Post("/v1/completions", good_body, "application/json");
  if (!res) {
    why = "no response: " + httplib::to_string(res.error());
    return std::nullopt;
  }
  if (res->status != 200) {
    why = "status " + std::to_string(res->status) + ": " + res->body;
    return std::nullopt;
  }
  auto body = json::parse(res->body, nullptr, false);
  if (body.is_discarded()) {
    why = "not JSON: " + res->body;
    return std::nullopt;
  }
  return body;
}

/// Starts the node and waits until it serves a completion (the scheduler has seen
/// its workers).
void wait_ready(const node& n) {
  std::string why;
  bool ready = eventually([&] { return n.proc->running() && good_completion(n, why).has_value(); },
                          60s, 200ms);
  INFO("last attempt: " << why << "\nnode log:\n" << n.logs());
  REQUIRE(ready);
}

void check_serves(const node& n) {
  std::string why;
  auto body = good_completion(n, why);
  INFO(why);
  REQUIRE(body);
  CHECK((*body)["usage"]["completion_tokens"] == 8);
  CHECK((*body)["choices"][0]["token_ids"].size() == 8);
  CHECK((*body)["choices"][0]["finish_reason"] == "length");
}

struct bad_request {
  const char* what;
  std::string method;
  std::string path;
  std::string body;
  std::vector<int> status;          ///< acceptable statuses, the documented one first
  std::optional<std::string> param; ///< nullopt: error.param must be null
  std::string fragment;             ///< in error.message
  std::string code;                 ///< error.code, when not empty
};

httplib::Result send(httplib::Client& cli, const bad_request& r) {
  const char* type = "application/json";
  if (r.method == "POST")
    return cli.Post(r.path.c_str(), r.body, type);
  if (r.method == "PUT")
    return cli.Put(r.path.c_str(), r.body, type);
  if (r.method == "DELETE")
    return cli.Delete(r.path.c_str());
  if (r.method == "GET")
    return cli.Get(r.path.c_str());
  FAIL("no such method in the test: " << r.method);
  return cli.Get("/");
}

std::string completion(const std::string& fields) {
  return R"({"model": ")" + model + R"(", )" + fields + "}";
}

} // namespace

TEST_CASE("the gateway answers each bad request with its status and error, and keeps serving") {
  node n;
  wait_ready(n);

  const std::string chat_pfx = R"({"model": ")" + model + R"(", "messages": )";
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  std::vector<bad_request> rows = {
      {"malformed JSON",
       "POST",
       "/v1/completions",
       R"({"model": "prfaas-ref-hybrid", "prompt": )",
       {400},
       std::nullopt,
       "not valid JSON"},
      {"empty body", "POST", "/v1/completions", "", {400}, std::nullopt, "not valid JSON"},
      {"array body",
       "POST",
       "/v1/completions",
       "[1, 2, 3]",
       {400},
       std::nullopt,
       "must be a JSON object, got array"},
      {"deeply nested arrays",
       "POST",
       "/v1/completions",
       deep,
       {400},
       std::nullopt,
       "must be a JSON object, got array"},
      {"missing model",
       "POST",
       "/v1/completions",
       R"({"prompt": "hi"})",
       {400},
       "model",
       "model is required"},
      {"numeric model",
       "POST",
       "/v1/completions",
       R"({"model": 3, "prompt": "hi"})",
       {400},
       "model",
       "model must be a string"},
      {"unknown model",
       "POST",
       "/v1/completions",
       R"({"model": "gpt-4o", "prompt": "hi"})",
       {404},
       "model",
       "`gpt-4o` does not exist",
       "model_not_found"},
      {"numeric prompt",
       "POST",
       "/v1/completions",
       completion(R"("prompt": 12)"),
       {400},
       "prompt",
       "prompt must be a string"},
      {"token id out of range",
       "POST",
       "/v1/completions",
       completion(R"("prompt": [72, 300])"),
       {400},
       "prompt",
       "prompt[1] must be a token id"},
      {"negative max_tokens",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "max_tokens": -4)"),
       {400},
       "max_tokens",
       "max_tokens must be between 1 and 16384, got -4"},
      {"zero max_tokens",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "max_tokens": 0)"),
       {400},
       "max_tokens",
       "got 0"},
      {"huge max_tokens",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "max_tokens": 1000000000)"),
       {400},
       "max_tokens",
       "got 1000000000"},
      {"max_tokens beyond 64 bits",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "max_tokens": 1e30)"),
       {400},
       "max_tokens",
       "must be an integer"},
      {"string max_tokens",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "max_tokens": "8")"),
       {400},
       "max_tokens",
       "must be an integer, got string"},
      {"prompt plus max_tokens over the context",
       "POST",
       "/v1/completions",
       completion(R"("prompt": ")" + std::string(100, 'a') + R"(", "max_tokens": 2000)"),
       {400},
       "max_tokens",
       "exceeds the context of 2048 tokens"},
      {"prompt over the context",
       "POST",
       "/v1/completions",
       completion(R"("prompt": ")" + std::string(3000, 'a') + R"(")"),
       {413},
       "prompt",
       "prompt has 3000 tokens; this server accepts at most 2047",
       "context_length_exceeded"},
      {"body over max_body",
       "POST",
       "/v1/completions",
       completion(R"("prompt": ")" + std::string(max_body + 100, 'a') + R"(")"),
       {413},
       std::nullopt,
       "request body exceeds 65536 bytes"},
      {"temperature a string",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "temperature": "hot")"),
       {400},
       "temperature",
       "temperature must be a number"},
      {"temperature out of range",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "temperature": 9)"),
       {400},
       "temperature",
       "between 0 and 2"},
      {"negative seed",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "seed": -7)"),
       {400},
       "seed",
       "seed must be between 0"},
      {"n of 3",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "n": 3)"),
       {400},
       "n",
       "got 3"},
      {"stop a number",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "stop": 4)"),
       {400},
       "stop",
       "stop must be a string or an array of strings"},
      {"too many stops",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "stop": ["a", "b", "c", "d", "e"])"),
       {400},
       "stop",
       "at most 4 stop sequences"},
      {"stream a string",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "stream": "yes")"),
       {400},
       "stream",
       "stream must be a boolean"},
      {"bad streaming request gets a status, not SSE",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "stream": true, "max_tokens": -1)"),
       {400},
       "max_tokens",
       "got -1"},
      {"stream_options an array",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "stream": true, "stream_options": [])"),
       {400},
       "stream_options",
       "must be an object"},
      {"invalid UTF-8 in a string",
       "POST",
       "/v1/completions",
       completion("\"prompt\": \"caf\xc3\x28 \xff\xfe\""),
       {400},
       std::nullopt,
       "ill-formed UTF-8"},
      {"invalid UTF-8 outside a string",
       "POST",
       "/v1/completions",
       "{\"model\": \xff}",
       {400},
       std::nullopt,
       "not valid JSON"},
      {"chat: messages a string",
       "POST",
       "/v1/chat/completions",
       chat_pfx + R"("hello"})",
       {400},
       "messages",
       "messages must be a non-empty array"},
      {"chat: empty messages",
       "POST",
       "/v1/chat/completions",
       chat_pfx + "[]}",
       {400},
       "messages",
       "messages must be a non-empty array"},
      {"chat: unknown role",
       "POST",
       "/v1/chat/completions",
       chat_pfx + R"([{"role": "wizard", "content": "hi"}]})",
       {400},
       "messages[0].role",
       "got \"wizard\""},
      {"an unknown field",
       "POST",
       "/v1/completions",
       completion(R"("prompt": "hi", "top_k": 5)"),
       {400},
       "top_k",
       "unknown field top_k"},
      {"chat: tools",
       "POST",
       "/v1/chat/completions",
       chat_pfx + R"([{"role": "user", "content": "a"}], "tools": [{"type": "function"}]})",
       {400},
       "tools",
       "tool calling is not supported"},
      {"chat: missing content",
       "POST",
       "/v1/chat/completions",
       chat_pfx + R"([{"role": "user", "content": "a"}, {"role": "user"}]})",
       {400},
       "messages[1].content",
       "messages[1].content is required"},
      {"chat: image part",
       "POST",
       "/v1/chat/completions",
       chat_pfx +
           R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       {400},
       "messages[0].content[0]",
       "only text is supported"},
      {"chat: max_completion_tokens zero",
       "POST",
       "/v1/chat/completions",
       chat_pfx + R"([{"role": "user", "content": "hi"}], "max_completion_tokens": 0})",
       {400},
       "max_completion_tokens",
       "got 0"},
      // A known path with the wrong method: 405, naming the allowed method.
      {"GET on a POST endpoint",
       "GET",
       "/v1/completions",
       "",
       {405},
       std::nullopt,
       "not allowed on /v1/completions (allowed: POST)"},
      {"PUT on a POST endpoint",
       "PUT",
       "/v1/chat/completions",
       "{}",
       {405},
       std::nullopt,
       "not allowed on /v1/chat/completions (allowed: POST)"},
      {"DELETE on a GET endpoint",
       "DELETE",
       "/v1/models",
       "",
       {405},
       std::nullopt,
       "not allowed on /v1/models (allowed: GET)"},
      {"unknown path",
       "POST",
       "/v1/embeddings",
       completion(R"("input": "hi")"),
       {404},
       std::nullopt,
       "no such endpoint: POST /v1/embeddings"},
      {"unknown GET path",
       "GET",
       "/v2/models",
       "",
       {404},
       std::nullopt,
       "no such endpoint: GET /v2/models"},
  };

  for (auto& row : rows) {
    INFO(row.what << " (" << row.method << " " << row.path << ", " << row.body.size() << " bytes)");
    auto cli = n.client();
    auto res = send(cli, row);
    REQUIRE(res);
    CHECK(std::find(row.status.begin(), row.status.end(), res->status) != row.status.end());
    if (res->status != row.status.front())
      WARN(row.what << ": got " << res->status << ", documented " << row.status.front());
    INFO("status " << res->status << ", body: " << res->body.substr(0, 500));
    CHECK(res->get_header_value("Content-Type") == "application/json");
    auto body = json::parse(res->body, nullptr, false);
    REQUIRE_FALSE(body.is_discarded()); // valid JSON, hence valid UTF-8
    REQUIRE(body.contains("error"));
    auto& e = body["error"];
    REQUIRE(e["message"].is_string());
    CHECK_THAT(e["message"].get<std::string>(), Contains(row.fragment));
    CHECK(e["type"].is_string());
    if (row.param)
      CHECK(e["param"] == *row.param);
    else
      CHECK(e["param"].is_null());
    if (!row.code.empty())
      CHECK(e["code"] == row.code);
    // The gateway is unharmed.
    check_serves(n);
  }
  CHECK(n.proc->running());
}

TEST_CASE("the gateway lists its model, reports health and exports metrics") {
  node n;
  wait_ready(n);
  auto cli = n.client();

  auto models = cli.Get("/v1/models");
  REQUIRE(models);
  CHECK(models->status == 200);
  auto m = json::parse(models->body);
  CHECK(m["object"] == "list");
  REQUIRE(m["data"].size() == 1);
  CHECK(m["data"][0]["id"] == model);
  CHECK(m["data"][0]["object"] == "model");
  CHECK(m["data"][0]["max_model_len"] == 2048);

  auto health = cli.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK_FALSE(json::parse(health->body, nullptr, false).is_discarded());

  auto metrics = cli.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK_THAT(metrics->get_header_value("Content-Type"), Contains("text/plain"));
  CHECK_THAT(metrics->body, Contains("# TYPE prfaas_gateway_requests_total counter"));
  CHECK_THAT(metrics->body, Contains("prfaas_gateway_requests_total{"));
  // wait_ready's completion ended well; the actor counts it just after replying.
  CHECK(eventually(
      [&] {
        return metric(http_get(n.http_port, "/metrics").value_or(""),
                      "prfaas_gateway_requests_total", {"outcome=\"ok\""}) >= 1;
      },
      10s));
}

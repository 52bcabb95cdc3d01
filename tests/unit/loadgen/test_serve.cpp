// `prfaas-bench serve` as a child process against a fake gateway: an httplib server in
// this test that speaks the documented API (GET /v1/models; POST completions and chat,
// streamed as SSE or whole; 429 with Retry-After; an error event mid-stream). The real
// gateway's end-to-end runs are elsewhere; this pins the client to the contract.

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace std::chrono_literals;
using namespace prfaas::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

/// The fake's behaviour; counts are by arrival order at the server.
struct fake_settings {
  int fail_429 = 0;                   ///< the first N requests get 429
  int fail_mid_stream = 0;            ///< the next N stream two chunks, then an error event
  std::chrono::milliseconds delay{0}; ///< before answering each request
  size_t expected_input = 0;          ///< prompt bytes every request must have (0: any)
};

class fake_gateway {
public:
  explicit fake_gateway(fake_settings s) : s_(s) {
    srv_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    srv_.Post("/v1/completions", [this](auto& req, auto& res) { handle(req, res, false); });
    srv_.Post("/v1/chat/completions", [this](auto& req, auto& res) { handle(req, res, true); });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    eventually([this] { return srv_.is_running(); }, 5s); // stop() is a no-op before
  }
  ~fake_gateway() {
    srv_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return n_; }
  std::vector<std::string> problems() {
    std::lock_guard lock{mu_};
    return problems_;
  }

private:
  void problem(std::string p) {
    std::lock_guard lock{mu_};
    problems_.push_back(std::move(p));
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    int n = n_++;
    std::this_thread::sleep_for(s_.delay);
    auto body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
      problem("body is not JSON");
      res.status = 400;
      return;
    }
    std::string prompt = chat ? body["messages"][0].value("content", "") : body.value("prompt", "");
    if (body.value("model", "") != "fake-model")
      problem("model " + body.value("model", std::string{"(none)"}));
    if (body.value("ignore_eos", false) != true)
      problem("ignore_eos not set");
    if (s_.expected_input && prompt.size() != s_.expected_input)
      problem("prompt of " + std::to_string(prompt.size()) + " bytes");
    if (req.get_header_value("Content-Type") != "application/json")
      problem("content type " + req.get_header_value("Content-Type"));
    bool stream = body.value("stream", false);
    if (stream &&
        !(body.contains("stream_options") && body["stream_options"].value("include_usage", false)))
      problem("include_usage not asked for");
    int max_tokens = body.value("max_tokens", 0);

    if (n < s_.fail_429) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content(
          R"({"error":{"message":"queue full","type":"rate_limit","param":null,"code":"queue_full"}})",
          "application/json");
      return;
    }
    std::string route = n % 2 ? "prfaas" : "pd";
    json prfaas = {{"request_id", "req-" + std::to_string(n)},
                   {"route", route},
                   {"engine_prefill_ms", 2.0},
                   {"transfer_wire_ms", 1.0},
                   {"ttft_ms", 4.0},
                   {"attempts", 1}};
    json usage = {{"prompt_tokens", prompt.size()},
                  {"completion_tokens", max_tokens},
                  {"total_tokens", prompt.size() + max_tokens}};
    auto piece = [chat](const std::string& text, json finish) {
      json c = {{"id", "cmpl-1"}, {"created", 1}, {"model", "fake-model"}};
      if (chat) {
        c["object"] = "chat.completion.chunk";
        c["choices"] = {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", finish}}};
      } else {
        c["object"] = "text_completion";
        c["choices"] = {{{"index", 0}, {"text", text}, {"finish_reason", finish}}};
      }
      return c;
    };
    if (!stream) {
      json whole = piece(std::string(max_tokens, 'x'), "length");
      if (chat)
        whole["choices"][0]["message"] = {{"role", "assistant"},
                                          {"content", std::string(max_tokens, 'x')}};
      whole["usage"] = usage;
      whole["prfaas"] = prfaas;
      res.set_content(whole.dump(), "application/json");
      return;
    }
    std::vector<std::string> events;
    if (chat)
      events.push_back(json{{"object", "chat.completion.chunk"},
                            {"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}}}}}}}
                           .dump());
    bool fail = n < s_.fail_429 + s_.fail_mid_stream;
    int chunks = fail ? 2 : max_tokens;
    for (int i = 0; i < chunks; ++i)
      events.push_back(piece("x", nullptr).dump());
    if (fail) {
      events.push_back(
          R"({"error":{"message":"decode instance lost","type":"server_error","param":null,"code":"decode_failed"}})");
    } else {
      auto last = piece("", "length");
      last["prfaas"] = prfaas;
      events.push_back(last.dump());
      events.push_back(
          json{{"object", "text_completion"}, {"choices", json::array()}, {"usage", usage}}.dump());
      events.push_back("[DONE]");
    }
    res.set_chunked_content_provider("text/event-stream",
                                     [events](size_t, httplib::DataSink& sink) {
                                       for (auto& e : events) {
                                         // Each event in two writes, so events straddle the
                                         // client's reads.
                                         auto text = "data: " + e + "\n\n";
                                         auto half = text.size() / 2;
                                         sink.write(text.data(), half);
                                         sink.write(text.data() + half, text.size() - half);
                                       }
                                       sink.done();
                                       return true;
                                     });
  }

  fake_settings s_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> n_{0};
  std::mutex mu_;
  std::vector<std::string> problems_;
};

struct bench_run {
  int code = -1;
  std::string output;
  json result;
};

bench_run serve(std::vector<std::string> args) {
  temp_dir dir{"prfaas-loadgen"};
  auto json_path = dir.path() / "result.json";
  command cmd;
  cmd.argv = {PRFAAS_BENCH_BIN, "serve", "--json", json_path.string()};
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  cmd.out_file = dir.path() / "out.log";
  cmd.err_file = dir.path() / "err.log";
  auto r = run(cmd, 120s);
  bench_run out;
  out.code = r.code.value_or(-1);
  out.output = r.output;
  auto text = read_file(json_path);
  if (!text.empty())
    out.result = json::parse(text, nullptr, false);
  return out;
}

} // namespace

TEST_CASE("serve: streamed completions, with a 429 and a mid-stream error counted") {
  fake_gateway gw{{.fail_429 = 1, .fail_mid_stream = 1, .expected_input = 300}};
  auto r = serve({"--url", gw.url(), "--workload", "fixed", "--input-len", "300", "--output-len",
                  "8", "--requests", "10", "--arrival", "closed", "--concurrency", "2", "--seed",
                  "7", "--per-request"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(gw.problems().empty());
  CHECK(gw.requests() == 10);
  auto& j = r.result;
  REQUIRE(j.is_object());
  CHECK(j["config"]["model"] == "fake-model"); // from GET /v1/models
  CHECK(j["requests"]["total"] == 10);
  CHECK(j["requests"]["ok"] == 8);
  CHECK(j["requests"]["failed"] == 2);
  CHECK(j["requests"]["client_saturated"] == 0);
  CHECK(j["errors"] == json{{"http_429", 1}, {"stream_error", 1}});
  CHECK(j["tokens"]["input"] == 8 * 300);
  CHECK(j["tokens"]["output"] == 8 * 8);
  CHECK(j["ttft_ms"]["count"] == 8);
  CHECK(j["tpot_ms"]["count"] == 8);
  CHECK(j["overhead_ms"]["count"] == 8);
  CHECK(j["routes"]["prfaas"].get<int>() + j["routes"]["pd"].get<int>() == 8);
  REQUIRE(j["per_request"].size() == 10);
  int with_retry_after = 0;
  for (auto& x : j["per_request"]) {
    if (x["status"] == "http_429")
      with_retry_after += x["error"].get<std::string>().find("Retry-After: 1") != std::string::npos;
    if (x["status"] == "stream_error")
      CHECK_THAT(x["error"].get<std::string>(), Contains("decode instance lost"));
    if (x["status"] == "ok")
      CHECK(x["prfaas"]["engine_prefill_ms"] == 2.0);
  }
  CHECK(with_retry_after == 1);
  CHECK_THAT(r.output, Contains("http_429 1"));
  CHECK_THAT(r.output, Contains("stream_error 1"));
}

TEST_CASE("serve: chat endpoint with open-loop Poisson arrivals") {
  fake_gateway gw{{.expected_input = 0}};
  auto r = serve({"--url", gw.url(), "--endpoint", "chat", "--model", "fake-model", "--workload",
                  "lognormal", "--input-min", "100", "--input-max", "2000", "--output-len", "5",
                  "--rate", "50", "--requests", "6"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(gw.problems().empty());
  CHECK(r.result["requests"]["ok"] == 6);
  CHECK(r.result["tokens"]["output"] == 30);
  CHECK(r.result["ttft_ms"]["count"] == 6);
  CHECK(r.result["config"]["endpoint"] == "chat");
}

TEST_CASE("serve: whole responses with --no-stream") {
  fake_gateway gw{{.fail_429 = 1}};
  auto r = serve({"--url", gw.url(), "--no-stream", "--workload", "fixed", "--input-len", "64",
                  "--output-len", "3", "--requests", "4", "--arrival", "closed"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(gw.problems().empty());
  CHECK(r.result["requests"]["ok"] == 3);
  CHECK(r.result["errors"] == json{{"http_429", 1}});
  CHECK(r.result["tokens"]["output"] == 9);
  CHECK(r.result["ttft_ms"]["count"] == 0);
  CHECK(r.result["goodput"]["requests_per_s"].is_null());
  CHECK(r.result["routes"].size() == 2);
}

TEST_CASE("serve: arrivals that find every slot busy are client-saturated, not delayed") {
  // One slot and a server that holds each request 2 s: the arrivals that follow within
  // that time cannot be sent.
  fake_gateway gw{{.delay = 2000ms}};
  auto r =
      serve({"--url", gw.url(), "--model", "fake-model", "--workload", "fixed", "--input-len", "10",
             "--output-len", "2", "--rate", "100", "--requests", "4", "--max-in-flight", "1"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto& j = r.result;
  int ok = j["requests"]["ok"], saturated = j["requests"]["client_saturated"];
  CHECK(ok >= 1);
  CHECK(saturated >= 1);
  CHECK(ok + saturated == 4);
  CHECK(j["errors"]["client_saturated"] == saturated);
  CHECK(gw.requests() == ok);
  CHECK_THAT(r.output, Contains("raise --max-in-flight"));
}

TEST_CASE("serve: a bad trace line or an unreachable server stops it before any load") {
  temp_dir dir{"prfaas-loadgen-trace"};
  auto trace = dir.file(
      "t.jsonl", R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]})"
                 "\n{\"timestamp\": 1}\n");
  auto bad = serve({"--workload", "trace", "--trace", trace.string(), "--model", "m"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Contains(trace.string() + ":2: missing \"input_length\""));

  auto port = free_ports(1)[0];
  auto down = serve({"--url", "http://127.0.0.1:" + std::to_string(port), "--requests", "1"});
  CHECK(down.code == 1);
  CHECK_THAT(down.output, Contains("/v1/models"));
}

TEST_CASE("serve: --ramp-up starts the closed loop's streams evenly over its span") {
  // Four streams over 2 s: the first requests go out at about 0, 0.5, 1 and 1.5 s, not
  // all at once (identical requests started together stay in lock-step).
  fake_gateway gw{{.delay = 100ms}};
  auto r = serve({"--url", gw.url(), "--model", "fake-model", "--workload", "fixed", "--input-len",
                  "10", "--output-len", "2", "--arrival", "closed", "--concurrency", "4",
                  "--ramp-up", "2", "--requests", "4", "--per-request"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.result["config"]["ramp_up_s"] == 2.0);
  REQUIRE(r.result["per_request"].size() == 4);
  std::vector<double> sent;
  for (auto& x : r.result["per_request"])
    sent.push_back(x["sent_s"].get<double>());
  std::sort(sent.begin(), sent.end());
  for (size_t k = 0; k < sent.size(); ++k) {
    INFO("stream " << k);
    CHECK(sent[k] >= 0.5 * k); // never before its start (lateness is the machine's)
  }

  auto open = serve({"--url", gw.url(), "--model", "fake-model", "--rate", "5", "--ramp-up", "1",
                     "--requests", "1"});
  CHECK(open.code == 1);
  CHECK_THAT(open.output, Contains("--ramp-up applies to --arrival closed only"));
}

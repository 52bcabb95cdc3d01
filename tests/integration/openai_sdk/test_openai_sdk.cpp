// The official OpenAI SDK (Node, openai 4.x pinned in package-lock.json with its
// integrity hashes) drives chat and completions, streamed and not, against
// configs/llama-local.yaml on the tiny Qwen3.5 model: sdk_test.mjs checks the shapes, the
// streams against the unstreamed answers, logprobs, a refused field, and that `usage`
// counts the model's own tokens — with the chat template applied — as this test
// computes them from the GGUF's vocabulary.

#include <catch2/catch.hpp>

#include <regex>

#include <nlohmann/json.hpp>

#include "prfaas/engine/llama_engine.hpp"
#include "support/http_probe.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
namespace t = prfaas::test;
namespace fs = std::filesystem;

TEST_CASE("the OpenAI Node SDK: chat and completions, streamed and not, real tokens",
          "[llama][sdk]") {
  const std::string model_file = std::string{PRFAAS_MODELS_DIR} + "/tiny-qwen35.gguf";
  // The SDK, installed once per build tree from the committed lock file.
  const fs::path sdk = fs::path{PRFAAS_BUILD_DIR} / "openai-sdk";
  fs::create_directories(sdk);
  for (const char* f : {"package.json", "package-lock.json", "sdk_test.mjs"})
    fs::copy_file(fs::path{PRFAAS_SDK_DIR} / f, sdk / f, fs::copy_options::overwrite_existing);
  if (!fs::exists(sdk / "node_modules" / "openai" / "package.json")) {
    auto npm = t::run({.argv = {"npm", "ci", "--no-audit", "--no-fund", "--prefix", sdk.string()},
                       .out_file = sdk / "npm.log"},
                      300s);
    INFO(npm.output);
    REQUIRE(npm.code == 0);
  }

  // What usage must say: the prompts in the model's tokens, the chat through its template.
  auto tok = prfaas::engine::make_llama_tokenizer(model_file);
  REQUIRE(tok.ok());
  const auto completion_tokens = (*tok)->tokenize(
      "Prefill-as-a-Service ships the KVCache of hybrid models across datacenters.", true, false);
  const std::vector<prfaas::engine::chat_message> chat{
      {"system", "You are terse."}, {"user", "What crosses the datacenter link?"}};
  const auto rendered = (*tok)->chat_prompt(chat);
  REQUIRE(rendered.ok());
  REQUIRE_THAT(*rendered,
               Catch::Matchers::Contains("<|im_start|>system\nYou are terse.<|im_end|>"));
  const auto chat_tokens = (*tok)->tokenize(*rendered, true, true);
  const nlohmann::json expect = {{"completion_prompt_tokens", completion_tokens->size()},
                                 {"chat_prompt_tokens", chat_tokens->size()}};

  t::temp_dir dir;
  std::map<int, int> ports;
  auto yaml = t::with_free_ports(
      t::read_file(std::string{PRFAAS_SOURCE_DIR} + "/configs/llama-local.yaml"), ports);
  yaml = std::regex_replace(yaml, std::regex{"gguf: .*"}, "gguf: " + model_file);
  auto cfg = dir.file("llama-local.yaml", yaml);
  t::child_process node(
      {.argv = {std::string{PRFAAS_BIN_DIR} + "/prfaas-node", "--config", cfg.string(), "--all"},
       .out_file = dir.path() / "node.log"});
  const int http = ports.at(8000);
  REQUIRE(t::eventually([&] { return t::http_get(http, "/health").has_value(); }, 60s, 50ms));
  REQUIRE(t::eventually(
      [&] {
        auto s = t::peer_state(ports.at(9101), "prfaas-0");
        return s && s->state == "up";
      },
      30s, 50ms));
  REQUIRE(t::eventually(
      [&] {
        const auto m = t::http_get(ports.at(9101), "/metrics").value_or("");
        return t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"prefill\""}) == 2 &&
               t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"decode\""}) == 1;
      },
      60s, 50ms));

  auto r =
      t::run({.argv = {"node", (sdk / "sdk_test.mjs").string()},
              .extra_env = {"PRFAAS_BASE_URL=http://127.0.0.1:" + std::to_string(http) + "/v1",
                            "PRFAAS_MODEL=prfaas-tiny-qwen35", "PRFAAS_EXPECT=" + expect.dump()},
              .out_file = dir.path() / "sdk.log"},
             120s);
  INFO(r.output << "\n" << node.output());
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Matchers::Contains("all OpenAI SDK checks passed"));
}

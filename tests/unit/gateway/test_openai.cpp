// The OpenAI HTTP contract as plain functions: every way parse_completion rejects a
// body (status, the field it names, what it says), what it accepts and the defaults it
// fills in, and the shapes of responses and SSE events (logprobs included). Prompts go
// through the byte tokenizer here; tests/unit/llama covers a GGUF's.

#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gateway/openai.hpp"

using namespace prfaas::serving;
using Catch::Matchers::Contains;

namespace {

const prfaas::engine::byte_tokenizer bytes;

/// Small limits so that each bound is reachable with a short body.
api_limits limits() {
  api_limits l;
  l.model = "m";
  l.max_context = 64;
  l.max_prompt_tokens = 48;
  l.max_output_tokens = 32;
  l.default_max_tokens = 16;
  l.max_stop = 4;
  l.max_stop_bytes = 8;
  return l;
}

completion_request accept(const std::string& body, bool chat = false) {
  auto r = parse_completion(body, chat, limits(), bytes);
  if (auto* e = std::get_if<api_error>(&r))
    FAIL("rejected " << body << ": " << e->status << " " << e->message);
  return std::get<completion_request>(r);
}

/// Decodes UTF-8 strictly (no overlongs, no surrogates, nothing above U+10FFFF);
/// nullopt when `s` is not valid UTF-8.
std::optional<std::vector<uint32_t>> decode_utf8(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80             ? 0
                : (c & 0xE0) == 0xC0 ? 1
                : (c & 0xF0) == 0xE0 ? 2
                : (c & 0xF8) == 0xF0 ? 3
                                     : -1;
    if (extra < 0 || i + extra >= s.size())
      return std::nullopt;
    uint32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80)
        return std::nullopt;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t min_for[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_for[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return std::nullopt;
    out.push_back(cp);
    i += 1 + extra;
  }
  return out;
}

struct reject_row {
  const char* what;
  std::string body;
  bool chat;
  int status;
  std::string param; ///< empty: error.param is null
  std::string fragment;
};

} // namespace

TEST_CASE("parse_completion rejects each malformed body with its status, field and reason") {
  const std::string pfx = R"({"model": "m", )";
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], )";
  const std::string cmpl = R"({"model": "m", "prompt": "hi", )";
  const std::string p40(40, 'x');
  const std::string p49(49, 'x');
  std::vector<reject_row> rows = {
      // the body itself
      {"truncated JSON", R"({"model": "m", "prompt": "hi")", false, 400, "", "not valid JSON"},
      {"empty body", "", false, 400, "", "not valid JSON"},
      {"trailing garbage", R"({"model": "m", "prompt": "hi"} x)", false, 400, "", "not valid JSON"},
      {"array body", "[1, 2]", false, 400, "", "must be a JSON object, got array"},
      {"string body", R"("hello")", false, 400, "", "must be a JSON object, got string"},
      {"null body", "null", false, 400, "", "must be a JSON object, got null"},
      {"invalid UTF-8 byte in a string",
       "{\"model\": \"m\", \"prompt\": \"a\xff"
       "b\"}",
       false, 400, "", "ill-formed UTF-8"},
      {"overlong UTF-8 in a string", "{\"model\": \"m\", \"prompt\": \"a\xc0\xaf\"}", false, 400,
       "", "ill-formed UTF-8"},
      {"truncated UTF-8 sequence", "{\"model\": \"m\", \"prompt\": \"\xe2\x82\"}", false, 400, "",
       "ill-formed UTF-8"},
      {"lone surrogate escape", R"({"model": "m", "prompt": "\ud800"})", false, 400, "",
       "surrogate"},
      // model
      {"missing model", R"({"prompt": "hi"})", false, 400, "model", "model is required"},
      {"null model", R"({"model": null, "prompt": "hi"})", false, 400, "model",
       "model is required"},
      {"numeric model", R"({"model": 7, "prompt": "hi"})", false, 400, "model",
       "model must be a string, got number"},
      {"unknown model", R"({"model": "gpt-4", "prompt": "hi"})", false, 404, "model",
       "`gpt-4` does not exist"},
      // prompt
      {"missing prompt", R"({"model": "m"})", false, 400, "prompt", "prompt is required"},
      {"null prompt", pfx + R"("prompt": null})", false, 400, "prompt", "prompt is required"},
      {"empty prompt", pfx + R"("prompt": ""})", false, 400, "prompt", "prompt must not be empty"},
      {"empty prompt in an array", pfx + R"("prompt": [""]})", false, 400, "prompt",
       "prompt must not be empty"},
      {"numeric prompt", pfx + R"("prompt": 5})", false, 400, "prompt", "prompt must be a string"},
      {"object prompt", pfx + R"("prompt": {"text": "hi"}})", false, 400, "prompt",
       "prompt must be a string"},
      {"empty prompt array", pfx + R"("prompt": []})", false, 400, "prompt",
       "prompt must be a string"},
      {"batched prompts", pfx + R"("prompt": ["a", "b"]})", false, 400, "prompt",
       "batched prompts are not supported"},
      {"boolean in a prompt array", pfx + R"("prompt": [true]})", false, 400, "prompt",
       "prompt must be a string"},
      {"token id outside the vocabulary", pfx + R"("prompt": [1, 257]})", false, 400, "prompt",
       "prompt[1] must be a token id between 0 and 256"},
      {"negative token id", pfx + R"("prompt": [-1]})", false, 400, "prompt",
       "prompt[0] must be a token id"},
      {"huge token id", pfx + R"("prompt": [18446744073709551615]})", false, 400, "prompt",
       "prompt[0] must be a token id"},
      {"fractional token id", pfx + R"("prompt": [1, 2.5]})", false, 400, "prompt",
       "prompt[1] must be a token id"},
      {"string among token ids", pfx + R"("prompt": [1, 2, "a"]})", false, 400, "prompt",
       "prompt[2] must be a token id"},
      {"prompt over max_prompt_tokens", pfx + R"("prompt": ")" + p49 + R"("})", false, 413,
       "prompt", "prompt has 49 tokens; this server accepts at most 48"},
      // chat messages
      {"missing messages", R"({"model": "m"})", true, 400, "messages", "messages is required"},
      {"messages an object", pfx + R"("messages": {"role": "user", "content": "hi"}})", true, 400,
       "messages", "messages must be a non-empty array"},
      {"empty messages", pfx + R"("messages": []})", true, 400, "messages",
       "messages must be a non-empty array"},
      {"message not an object", pfx + R"("messages": ["hi"]})", true, 400, "messages[0]",
       "messages[0] must be an object, got string"},
      {"message without a role", pfx + R"("messages": [{"content": "hi"}]})", true, 400,
       "messages[0].role", "messages[0].role must be a string"},
      {"numeric role", pfx + R"("messages": [{"role": 1, "content": "hi"}]})", true, 400,
       "messages[0].role", "messages[0].role must be a string"},
      {"unknown role", pfx + R"("messages": [{"role": "robot", "content": "hi"}]})", true, 400,
       "messages[0].role",
       "must be one of system, developer, user, assistant, tool; got \"robot\""},
      {"message without content", pfx + R"("messages": [{"role": "user"}]})", true, 400,
       "messages[0].content", "messages[0].content is required"},
      {"numeric content", pfx + R"("messages": [{"role": "user", "content": 3}]})", true, 400,
       "messages[0].content", "must be a string or an array of text parts"},
      {"second message bad",
       pfx +
           R"("messages": [{"role": "user", "content": "a"}, {"role": "user", "content": null}]})",
       true, 400, "messages[1].content", "messages[1].content is required"},
      {"image content part",
       pfx +
           R"("messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       true, 400, "messages[0].content[0]", "only text is supported"},
      {"string content part", pfx + R"("messages": [{"role": "user", "content": ["hi"]}]})", true,
       400, "messages[0].content[0]", "must be {\"type\": \"text\", \"text\": string}"},
      {"text part without text",
       pfx +
           R"("messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}]})",
       true, 400, "messages[0].content[1]", "only text is supported"},
      {"text part with numeric text",
       pfx + R"("messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})", true,
       400, "messages[0].content[0]", "only text is supported"},
      {"chat over max_prompt_tokens",
       pfx + R"("messages": [{"role": "user", "content": ")" + p40 + R"("}]})", true, 413,
       "messages", "this server accepts at most 48"},
      // max_tokens
      {"negative max_tokens", cmpl + R"("max_tokens": -1})", false, 400, "max_tokens",
       "max_tokens must be between 1 and 32, got -1"},
      {"zero max_tokens", cmpl + R"("max_tokens": 0})", false, 400, "max_tokens",
       "max_tokens must be between 1 and 32, got 0"},
      {"max_tokens over the output limit", cmpl + R"("max_tokens": 33})", false, 400, "max_tokens",
       "got 33"},
      {"max_tokens at uint64 max", cmpl + R"("max_tokens": 18446744073709551615})", false, 400,
       "max_tokens", "got 18446744073709551615"},
      {"max_tokens beyond uint64", cmpl + R"("max_tokens": 99999999999999999999999})", false, 400,
       "max_tokens", "max_tokens must be an integer, got number"},
      {"fractional max_tokens", cmpl + R"("max_tokens": 8.5})", false, 400, "max_tokens",
       "max_tokens must be an integer, got number"},
      {"float-written max_tokens", cmpl + R"("max_tokens": 8.0})", false, 400, "max_tokens",
       "must be an integer"},
      {"exponent max_tokens", cmpl + R"("max_tokens": 1e3})", false, 400, "max_tokens",
       "must be an integer"},
      {"string max_tokens", cmpl + R"("max_tokens": "8"})", false, 400, "max_tokens",
       "max_tokens must be an integer, got string"},
      {"prompt plus max_tokens over the context",
       pfx + R"("prompt": ")" + p40 + R"(", "max_tokens": 25})", false, 400, "max_tokens",
       "prompt (40 tokens) plus max_tokens (25) exceeds the context of 64 tokens"},
      {"chat max_completion_tokens zero", chat + R"("max_completion_tokens": 0})", true, 400,
       "max_completion_tokens", "max_completion_tokens must be between 1 and 32, got 0"},
      {"chat max_completion_tokens over the context",
       // 20 + 24 bytes of template = 44 tokens
       pfx + R"("messages": [{"role": "user", "content": ")" + std::string(20, 'x') +
           R"("}], "max_completion_tokens": 21})",
       true, 400, "max_completion_tokens",
       "prompt (44 tokens) plus max_completion_tokens (21) exceeds the context"},
      {"chat max_tokens negative", chat + R"("max_tokens": -5})", true, 400, "max_tokens",
       "got -5"},
      // temperature
      {"negative temperature", cmpl + R"("temperature": -0.1})", false, 400, "temperature",
       "temperature must be between 0 and 2"},
      {"temperature above 2", cmpl + R"("temperature": 2.5})", false, 400, "temperature",
       "temperature must be between 0 and 2, got 2.5"},
      {"huge temperature", cmpl + R"("temperature": 1e308})", false, 400, "temperature",
       "between 0 and 2"},
      {"string temperature", cmpl + R"("temperature": "hot"})", false, 400, "temperature",
       "temperature must be a number, got string"},
      {"boolean temperature", cmpl + R"("temperature": true})", false, 400, "temperature",
       "temperature must be a number, got boolean"},
      // seed, n
      {"negative seed", cmpl + R"("seed": -1})", false, 400, "seed", "seed must be between 0 and"},
      {"fractional seed", cmpl + R"("seed": 1.5})", false, 400, "seed", "seed must be an integer"},
      {"string seed", cmpl + R"("seed": "42"})", false, 400, "seed",
       "seed must be an integer, got string"},
      {"n of 2", cmpl + R"("n": 2})", false, 400, "n", "n must be between 1 and 1, got 2"},
      {"n of 0", cmpl + R"("n": 0})", false, 400, "n", "got 0"},
      {"string n", cmpl + R"("n": "1"})", false, 400, "n", "n must be an integer"},
      // stop
      {"numeric stop", cmpl + R"("stop": 5})", false, 400, "stop",
       "stop must be a string or an array of strings, got number"},
      {"object stop", cmpl + R"("stop": {"a": 1}})", false, 400, "stop", "got object"},
      {"non-string in stop", cmpl + R"("stop": ["a", 1]})", false, 400, "stop",
       "stop[1] must be a string"},
      {"null in stop", cmpl + R"("stop": [null]})", false, 400, "stop", "stop[0] must be a string"},
      {"too many stops", cmpl + R"("stop": ["a", "b", "c", "d", "e"]})", false, 400, "stop",
       "at most 4 stop sequences, got 5"},
      {"stop too long", cmpl + R"("stop": "123456789"})", false, 400, "stop", "at most 8 bytes"},
      {"stop too long in UTF-8 bytes", cmpl + R"("stop": ["a", "ééééé"]})", false, 400, "stop",
       "at most 8 bytes"},
      // booleans
      {"string stream", cmpl + R"("stream": "yes"})", false, 400, "stream",
       "stream must be a boolean, got string"},
      {"numeric stream", cmpl + R"("stream": 1})", false, 400, "stream",
       "stream must be a boolean, got number"},
      {"string ignore_eos", cmpl + R"("ignore_eos": "true"})", false, 400, "ignore_eos",
       "ignore_eos must be a boolean"},
      {"numeric return_token_ids", cmpl + R"("return_token_ids": 0})", false, 400,
       "return_token_ids", "return_token_ids must be a boolean"},
      {"stream_options an array", cmpl + R"("stream": true, "stream_options": []})", false, 400,
       "stream_options", "stream_options must be an object, got array"},
      {"stream_options a boolean", cmpl + R"("stream": true, "stream_options": true})", false, 400,
       "stream_options", "got boolean"},
      {"include_usage a string",
       cmpl + R"("stream": true, "stream_options": {"include_usage": "yes"}})", false, 400,
       "stream_options.include_usage", "include_usage must be a boolean"},
      {"stream_options without stream", cmpl + R"("stream_options": {"include_usage": true}})",
       false, 400, "stream_options", "only allowed with stream: true"},
      {"obfuscation asked for",
       cmpl + R"("stream": true, "stream_options": {"include_obfuscation": true}})", false, 400,
       "stream_options.include_obfuscation", "no obfuscation"},
      {"unknown stream option", cmpl + R"("stream": true, "stream_options": {"x": 1}})", false, 400,
       "stream_options.x", "unknown field stream_options.x"},
      // fields OpenAI does not define, and OpenAI fields of the other endpoint
      {"unknown field", cmpl + R"("top_k": 40})", false, 400, "top_k", "unknown field top_k"},
      {"chat field in completions", cmpl + R"("messages": []})", false, 400, "messages",
       "unknown field messages"},
      {"completions field in chat", chat + R"("echo": true})", true, 400, "echo",
       "unknown field echo"},
      {"top_logprobs in completions", cmpl + R"("top_logprobs": 2})", false, 400, "top_logprobs",
       "unknown field"},
      // OpenAI fields prfaas does not honour: refused unless they ask for nothing
      {"best_of 2", cmpl + R"("best_of": 2})", false, 400, "best_of", "best_of above 1"},
      {"suffix", cmpl + R"("suffix": "end"})", false, 400, "suffix", "insertion"},
      {"tools", chat + R"("tools": [{"type": "function", "function": {"name": "f"}}]})", true, 400,
       "tools", "tool calling is not supported"},
      {"tool_choice required", chat + R"("tool_choice": "required"})", true, 400, "tool_choice",
       "tool calling"},
      {"functions", chat + R"("functions": [{"name": "f"}]})", true, 400, "functions",
       "function calling"},
      {"parallel_tool_calls", chat + R"("parallel_tool_calls": true})", true, 400,
       "parallel_tool_calls", "tool calling"},
      {"JSON mode", chat + R"("response_format": {"type": "json_object"}})", true, 400,
       "response_format", "only {\"type\": \"text\"}"},
      {"audio modality", chat + R"("modalities": ["text", "audio"]})", true, 400, "modalities",
       "only [\"text\"]"},
      {"audio", chat + R"("audio": {"voice": "alloy", "format": "wav"}})", true, 400, "audio",
       "audio output"},
      {"prediction", chat + R"("prediction": {"type": "content", "content": "x"}})", true, 400,
       "prediction", "predicted outputs"},
      {"reasoning_effort", chat + R"("reasoning_effort": "high"})", true, 400, "reasoning_effort",
       "reasoning-effort"},
      {"verbosity", chat + R"("verbosity": "low"})", true, 400, "verbosity", "verbosity"},
      {"web search", chat + R"("web_search_options": {}})", true, 400, "web_search_options",
       "web search"},
      {"store", chat + R"("store": true})", true, 400, "store", "does not store"},
      {"metadata", chat + R"("metadata": {"k": "v"}})", true, 400, "metadata",
       "stored completions"},
      {"service tier", chat + R"("service_tier": "flex"})", true, 400, "service_tier",
       "one service tier"},
      {"a message's name",
       pfx + R"("messages": [{"role": "user", "content": "a", "name": "bob"}]})", true, 400,
       "messages[0].name", "not supported"},
      {"a message's tool calls",
       pfx +
           R"("messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}]})",
       true, 400, "messages[0].tool_calls", "tool calling"},
      // sampling fields
      {"top_p 0", cmpl + R"("top_p": 0})", false, 400, "top_p", "greater than 0"},
      {"top_p above 1", cmpl + R"("top_p": 1.5})", false, 400, "top_p", "between 0 and 1"},
      {"presence_penalty above 2", cmpl + R"("presence_penalty": 2.5})", false, 400,
       "presence_penalty", "between -2 and 2"},
      {"frequency_penalty a string", cmpl + R"("frequency_penalty": "x"})", false, 400,
       "frequency_penalty", "must be a number"},
      {"logit_bias an array", cmpl + R"("logit_bias": [1]})", false, 400, "logit_bias",
       "must be an object"},
      {"logit_bias key not a token", cmpl + R"("logit_bias": {"abc": 1}})", false, 400,
       "logit_bias", "not a token id of this model"},
      {"logit_bias key outside the vocabulary", cmpl + R"("logit_bias": {"257": 1}})", false, 400,
       "logit_bias", "not a token id"},
      {"logit_bias above 100", cmpl + R"("logit_bias": {"5": 101}})", false, 400, "logit_bias",
       "between -100 and 100"},
      {"completions logprobs 6", cmpl + R"("logprobs": 6})", false, 400, "logprobs",
       "between 0 and 5"},
      {"completions logprobs true", cmpl + R"("logprobs": true})", false, 400, "logprobs",
       "must be an integer"},
      {"chat logprobs a number", chat + R"("logprobs": 3})", true, 400, "logprobs",
       "must be a boolean"},
      {"chat top_logprobs 21", chat + R"("logprobs": true, "top_logprobs": 21})", true, 400,
       "top_logprobs", "between 0 and 20"},
      {"top_logprobs without logprobs", chat + R"("top_logprobs": 2})", true, 400, "top_logprobs",
       "needs logprobs: true"},
      {"echo with logprobs", cmpl + R"("echo": true, "logprobs": 1})", false, 400, "echo",
       "not supported"},
      {"echo a string", cmpl + R"("echo": "yes"})", false, 400, "echo", "must be a boolean"},
      {"user a number", cmpl + R"("user": 5})", false, 400, "user", "must be a string"},
  };
  for (auto& row : rows) {
    INFO(row.what << ": " << row.body);
    auto r = parse_completion(row.body, row.chat, limits(), bytes);
    REQUIRE(std::holds_alternative<api_error>(r));
    auto& e = std::get<api_error>(r);
    CHECK(e.status == row.status);
    CHECK(e.param == row.param);
    CHECK_THAT(e.message, Contains(row.fragment));
    // The body a client gets is valid JSON in OpenAI's shape, whatever bytes the
    // message quotes.
    auto body = json::parse(safe_dump(e.body()));
    CHECK(body["error"]["message"].is_string());
    CHECK(body["error"]["type"] == "invalid_request_error");
    if (row.param.empty())
      CHECK(body["error"]["param"].is_null());
    else
      CHECK(body["error"]["param"] == row.param);
  }
}

TEST_CASE("an unknown model is a 404 with code model_not_found") {
  auto r = parse_completion(R"({"model": "other", "prompt": "x"})", false, limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  auto e = std::get<api_error>(r);
  CHECK(e.status == 404);
  CHECK(e.code == "model_not_found");
  auto body = e.body();
  CHECK(body["error"]["code"] == "model_not_found");
  CHECK(body["error"]["param"] == "model");
  CHECK_THAT(body["error"]["message"].get<std::string>(), Contains("serves `m`"));
}

TEST_CASE("a prompt over max_prompt_tokens is a 413 with code context_length_exceeded") {
  auto r = parse_completion(R"({"model": "m", "prompt": ")" + std::string(49, 'y') + R"("})", false,
                            limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  CHECK(std::get<api_error>(r).code == "context_length_exceeded");
  // Exactly at the limits is accepted: 48 prompt + 16 default = the 64-token context.
  auto ok = accept(R"({"model": "m", "prompt": ")" + std::string(48, 'y') + R"("})");
  CHECK(ok.prompt.size() == 48);
  CHECK(ok.max_tokens == 16);
  // ... and one output token more is not.
  auto over = parse_completion(R"({"model": "m", "prompt": ")" + std::string(48, 'y') +
                                   R"(", "max_tokens": 17})",
                               false, limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(over));
  CHECK(std::get<api_error>(over).status == 400);
  CHECK(std::get<api_error>(over).param == "max_tokens");
}

TEST_CASE("an error message quoting invalid UTF-8 still makes a valid JSON body") {
  auto r =
      parse_completion("{\"model\": \"m\", \"prompt\": \"\xff\xfe\xfd\"}", false, limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  auto text = safe_dump(std::get<api_error>(r).body());
  CHECK(decode_utf8(text).has_value());
  CHECK_NOTHROW(json::parse(text));
}

TEST_CASE("parse_completion fills in defaults") {
  auto r = accept(R"({"model": "m", "prompt": "hi"})");
  CHECK_FALSE(r.chat);
  CHECK(r.model == "m");
  CHECK(r.prompt == std::vector<token>{'h', 'i'});
  CHECK(r.max_tokens == 16);
  CHECK(r.temperature == 1.0f);
  CHECK_FALSE(r.has_seed);
  CHECK(r.stop.empty());
  CHECK_FALSE(r.stream);
  CHECK_FALSE(r.include_usage);
  CHECK_FALSE(r.ignore_eos);
  CHECK_FALSE(r.return_token_ids);
}

TEST_CASE("parse_completion reads every field and null means not given") {
  auto r = accept(R"({"model": "m", "prompt": ["hey"], "max_tokens": 32, "temperature": 0,
                      "seed": 18446744073709551615, "n": 1, "stream": true,
                      "stream_options": {"include_usage": true, "include_obfuscation": false},
                      "ignore_eos": true, "return_token_ids": true, "logprobs": null, "user": "u",
                      "frequency_penalty": 0.5, "presence_penalty": -1.5, "top_p": 0.9,
                      "logit_bias": {"65": -100, "7": 2.5}, "stop": null, "best_of": 1,
                      "suffix": null, "echo": false})");
  CHECK(r.frequency_penalty == 0.5f);
  CHECK(r.presence_penalty == -1.5f);
  CHECK(r.top_p == 0.9f);
  CHECK(r.logit_bias == std::vector<std::pair<int32_t, float>>{{7, 2.5f}, {65, -100.0f}});
  CHECK(r.logprobs == -1);
  CHECK(r.user == "user=u");
  const auto sp = r.sampling();
  CHECK(sp.top_p == 0.9f);
  CHECK(sp.logit_bias == r.logit_bias);
  CHECK(sp.temperature == 0.0f);
  CHECK(sp.seed == 18446744073709551615ull);
  CHECK(r.prompt == std::vector<token>{'h', 'e', 'y'});
  CHECK(r.max_tokens == 32);
  CHECK(r.temperature == 0.0f);
  CHECK(r.has_seed);
  CHECK(r.seed == 18446744073709551615ull);
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.ignore_eos);
  CHECK(r.return_token_ids);
  CHECK(r.stop.empty());

  auto nulls = accept(R"({"model": "m", "prompt": "x", "max_tokens": null, "temperature": null,
                          "seed": null, "n": null, "stream": null, "stream_options": null})");
  CHECK(nulls.max_tokens == 16);
  CHECK(nulls.temperature == 1.0f);
  CHECK_FALSE(nulls.has_seed);

  CHECK(accept(R"({"model": "m", "prompt": "x", "temperature": 2})").temperature == 2.0f);
  CHECK(accept(R"({"model": "m", "prompt": "x", "seed": 0})").has_seed);

  // Log-probabilities: a count for completions, a flag and a count for chat.
  CHECK(accept(R"({"model": "m", "prompt": "x", "logprobs": 0})").logprobs == 0);
  CHECK(accept(R"({"model": "m", "prompt": "x", "logprobs": 5})").logprobs == 5);
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "logprobs": true})", true).logprobs == 0);
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "logprobs": true, "top_logprobs": 20})", true)
            .logprobs == 20);
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "logprobs": false})", true).logprobs == -1);
  // Echo keeps the prompt's text; the identifiers are logged, the "nothing" values of the
  // fields prfaas does not honour are accepted.
  auto e = accept(R"({"model": "m", "prompt": "aé", "echo": true})");
  CHECK(e.echo);
  CHECK(e.prompt_text == "a\xc3\xa9");
  auto c = accept(R"({"model": "m", )" + msgs + R"(, "user": "u", "safety_identifier": "s",
                      "prompt_cache_key": "k", "tools": [], "tool_choice": "none",
                      "response_format": {"type": "text"}, "modalities": ["text"], "store": false,
                      "service_tier": "auto", "metadata": null, "parallel_tool_calls": false})",
                  true);
  CHECK(c.user == "user=u safety_identifier=s prompt_cache_key=k");
}

TEST_CASE("the profile engine refuses logprobs: it has no distribution to report") {
  auto l = limits();
  l.logprobs = false;
  auto r = parse_completion(R"({"model": "m", "prompt": "x", "logprobs": 1})", false, l, bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  CHECK(std::get<api_error>(r).param == "logprobs");
  CHECK(std::holds_alternative<completion_request>(
      parse_completion(R"({"model": "m", "prompt": "x"})", false, l, bytes)));
}

TEST_CASE("a prompt may be token ids or UTF-8 text, one token per byte (byte tokenizer)") {
  CHECK(accept(R"({"model": "m", "prompt": [0, 255, 7]})").prompt == std::vector<token>{0, 255, 7});
  // "é€" is 2 + 3 bytes of UTF-8.
  CHECK(accept(R"({"model": "m", "prompt": "é€"})").prompt ==
        std::vector<token>{0xC3, 0xA9, 0xE2, 0x82, 0xAC});
  CHECK(accept(R"({"model": "m", "prompt": "\u00e9"})").prompt == std::vector<token>{0xC3, 0xA9});
}

TEST_CASE("a chat becomes its prompt through the documented template") {
  const std::string body = R"({"model": "m", "messages": [
      {"role": "system", "content": "S"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})";
  auto r = accept(body, true);
  CHECK(r.chat);
  const std::string expected = "<|system|>\nS\n<|user|>\nab\n<|assistant|>\n";
  const std::vector<prfaas::engine::chat_message> msgs{{"system", "S"}, {"user", "ab"}};
  CHECK(bytes.chat_prompt(msgs).value() == expected);
  CHECK(r.prompt == tokenize(expected));
  CHECK(r.max_tokens == 16);
  // Fields an SDK sends back empty with an earlier answer are accepted when empty; an
  // assistant message may have no content.
  CHECK(accept(R"({"model": "m", "messages": [{"role": "tool", "content": "", "tool_call_id": ""},
                   {"role": "assistant", "content": null, "tool_calls": [], "refusal": null}]})",
               true)
            .prompt == tokenize("<|tool|>\n\n<|assistant|>\n\n<|assistant|>\n"));
}

TEST_CASE("chat takes max_completion_tokens over max_tokens, completions refuse it") {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "max_completion_tokens": 7})", true).max_tokens ==
        7);
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "max_tokens": 5})", true).max_tokens == 5);
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "max_tokens": 5, "max_completion_tokens": 7})",
               true)
            .max_tokens == 7);
  auto refused = parse_completion(R"({"model": "m", "prompt": "x", "max_completion_tokens": 7})",
                                  false, limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(refused));
  CHECK(std::get<api_error>(refused).param == "max_completion_tokens");
  // A null max_completion_tokens is not given: max_tokens still counts.
  CHECK(accept(R"({"model": "m", )" + msgs + R"(, "max_tokens": 5, "max_completion_tokens": null})",
               true)
            .max_tokens == 5);
  auto r = parse_completion(R"({"model": "m", )" + msgs +
                                R"(, "max_tokens": 0, "max_completion_tokens": null})",
                            true, limits(), bytes);
  REQUIRE(std::holds_alternative<api_error>(r));
  CHECK(std::get<api_error>(r).param == "max_tokens");
}

TEST_CASE("stop strings are kept as text and empty ones are dropped") {
  CHECK(accept(R"({"model": "m", "prompt": "x", "stop": "ab"})").stop ==
        std::vector<std::string>{"ab"});
  CHECK(accept(R"({"model": "m", "prompt": "x", "stop": ["\u00e9", "x\n", "\u20ac"]})").stop ==
        std::vector<std::string>{"\xc3\xa9", "x\n", "\xe2\x82\xac"});
  CHECK(accept(R"({"model": "m", "prompt": "x", "stop": ""})").stop.empty());
  // Exactly max_stop stops of exactly max_stop_bytes are fine.
  CHECK(
      accept(R"({"model": "m", "prompt": "x", "stop": ["12345678", "b", "c", "d"]})").stop.size() ==
      4);
}

TEST_CASE("tokenize is byte-level: every byte one token") {
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  auto tokens = tokenize(all);
  REQUIRE(tokens.size() == 256);
  for (int b = 0; b < 256; ++b)
    CHECK(tokens[b] == b);
  CHECK(bytes.tokenize(all, true, true).value() == tokens);
}

TEST_CASE("safe_dump never throws on invalid UTF-8") {
  for (std::string bad : {std::string("\xff"), std::string("a\xc0\xaf"), std::string("\xe2\x82"),
                          std::string("\xed\xa0\x80"), std::string("\xf8\x88\x80\x80\x80")}) {
    REQUIRE_FALSE(decode_utf8(bad)); // the checker below can tell
    json j = {{"message", bad}, {"nested", {{"k", json::array({bad})}}}};
    std::string out;
    REQUIRE_NOTHROW(out = safe_dump(j));
    CHECK(decode_utf8(out).has_value());
    CHECK_NOTHROW(json::parse(out));
  }
}

namespace {

completion_summary summary() {
  completion_summary s;
  s.id = "cmpl-r1";
  s.model = "m";
  s.created = 1700000000;
  s.prompt_tokens = 3;
  s.completion_tokens = 2;
  s.finish_reason = "length";
  s.prfaas = {{"route", "pd"}};
  return s;
}

output_delta delta(std::string text, std::vector<token> tokens) {
  output_delta d;
  d.text = std::move(text);
  d.tokens = std::move(tokens);
  return d;
}

json sse_json(const std::string& event) {
  REQUIRE(event.rfind("data: ", 0) == 0);
  REQUIRE(event.size() >= 8);
  REQUIRE(event.substr(event.size() - 2) == "\n\n");
  return json::parse(event.substr(6, event.size() - 8));
}

} // namespace

TEST_CASE("completion_body has the OpenAI fields for completions and chat") {
  auto r = accept(R"({"model": "m", "prompt": "hi"})");
  auto s = summary();
  auto b = json::parse(safe_dump(completion_body(r, s, delta("ok", {'o', 'k'}))));
  CHECK(b["id"] == "cmpl-r1");
  CHECK(b["object"] == "text_completion");
  CHECK(b["created"] == 1700000000);
  CHECK(b["model"] == "m");
  REQUIRE(b["choices"].size() == 1);
  CHECK(b["choices"][0]["index"] == 0);
  CHECK(b["choices"][0]["text"] == "ok");
  CHECK(b["choices"][0]["finish_reason"] == "length");
  CHECK(b["choices"][0]["logprobs"].is_null());
  CHECK_FALSE(b["choices"][0].contains("token_ids"));
  CHECK(b["usage"] == json{{"prompt_tokens", 3},
                           {"completion_tokens", 2},
                           {"total_tokens", 5},
                           {"prompt_tokens_details", {{"cached_tokens", 0}}}});
  CHECK(b["prfaas"]["route"] == "pd");

  auto c = accept(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                      "return_token_ids": true})",
                  true);
  auto cb = json::parse(safe_dump(completion_body(c, s, delta("\xc3\xa9", {0xC3, 0xA9}))));
  CHECK(cb["object"] == "chat.completion");
  CHECK(cb["choices"][0]["message"]["role"] == "assistant");
  CHECK(cb["choices"][0]["message"]["content"] == "\u00e9");
  CHECK(cb["choices"][0]["token_ids"] == json::array({0xC3, 0xA9}));
  CHECK_FALSE(cb["choices"][0].contains("text"));
}

TEST_CASE("sse_chunk: text chunks, the chat role chunk, and the finish chunk carrying prfaas") {
  auto s = summary();
  auto r = accept(R"({"model": "m", "prompt": "hi", "stream": true})");
  auto first = sse_json(sse_chunk(r, s, delta("ab", {'a', 'b'}), nullptr, true));
  CHECK(first["object"] == "text_completion");
  CHECK(first["id"] == "cmpl-r1");
  CHECK(first["choices"][0]["text"] == "ab");
  CHECK(first["choices"][0]["finish_reason"].is_null());
  CHECK_FALSE(first.contains("prfaas"));
  std::string reason = "stop";
  auto last = sse_json(sse_chunk(r, s, {}, &reason, false));
  CHECK(last["choices"][0]["finish_reason"] == "stop");
  CHECK(last["choices"][0]["text"] == "");
  CHECK(last["prfaas"]["route"] == "pd");

  auto c = accept(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true})", true);
  auto role = sse_json(sse_chunk(c, s, {}, nullptr, true));
  CHECK(role["object"] == "chat.completion.chunk");
  CHECK(role["choices"][0]["delta"]["role"] == "assistant");
  CHECK_FALSE(role["choices"][0]["delta"].contains("content"));
  auto role_and_text = sse_json(sse_chunk(c, s, delta("x", {'x'}), nullptr, true));
  CHECK(role_and_text["choices"][0]["delta"]["role"] == "assistant");
  CHECK(role_and_text["choices"][0]["delta"]["content"] == "x");
  auto mid = sse_json(sse_chunk(c, s, delta("yz", {'y', 'z'}), nullptr, false));
  CHECK_FALSE(mid["choices"][0]["delta"].contains("role"));
  CHECK(mid["choices"][0]["delta"]["content"] == "yz");
  CHECK(mid["choices"][0]["finish_reason"].is_null());
  auto fin = sse_json(sse_chunk(c, s, {}, &reason, false));
  CHECK(fin["choices"][0]["finish_reason"] == "stop");
  CHECK(fin["prfaas"]["route"] == "pd");
  CHECK_FALSE(fin["choices"][0]["delta"].contains("role"));
}

TEST_CASE("sse_usage and sse_error") {
  auto s = summary();
  auto r = accept(
      R"({"model": "m", "prompt": "hi", "stream": true, "stream_options": {"include_usage": true}})");
  auto u = sse_json(sse_usage(r, s));
  CHECK(u["choices"].is_array());
  CHECK(u["choices"].empty());
  CHECK(u["usage"]["prompt_tokens"] == 3);
  CHECK(u["usage"]["completion_tokens"] == 2);
  CHECK(u["usage"]["total_tokens"] == 5);
  CHECK(u["id"] == "cmpl-r1");

  api_error e{.status = 503, .message = "no capacity \xff", .type = "server_error", .code = "busy"};
  auto text = sse_error(e);
  auto done = std::string(sse_done);
  REQUIRE(text.size() > done.size());
  CHECK(text.substr(text.size() - done.size()) == done);
  auto ev = sse_json(text.substr(0, text.size() - done.size()));
  CHECK_THAT(ev["error"]["message"].get<std::string>(), Contains("no capacity"));
  CHECK(ev["error"]["type"] == "server_error");
  CHECK(ev["error"]["code"] == "busy");
  CHECK(ev["error"]["param"].is_null());
}

TEST_CASE("echo puts the prompt's text before the output, once") {
  auto s = summary();
  auto r = accept(R"({"model": "m", "prompt": "Q: ", "echo": true})");
  auto b = json::parse(safe_dump(completion_body(r, s, delta("A", {'A'}))));
  CHECK(b["choices"][0]["text"] == "Q: A");
  auto rs = accept(R"({"model": "m", "prompt": "Q: ", "echo": true, "stream": true})");
  CHECK(sse_json(sse_chunk(rs, s, delta("A", {'A'}), nullptr, true))["choices"][0]["text"] ==
        "Q: A");
  CHECK(sse_json(sse_chunk(rs, s, delta("B", {'B'}), nullptr, false))["choices"][0]["text"] == "B");
}

TEST_CASE("logprobs in OpenAI's shapes: completions' parallel lists, chat's content entries") {
  auto s = summary();
  output_delta d = delta("h\xc3\xa9", {'h', 0xC3, 0xA9});
  d.logprobs = {{"h", -0.5f, {{"h", -0.5f}, {"x", -1.5f}}, 0},
                {"\xc3", -0.25f, {{"\xc3", -0.25f}}, 1},
                {"\xa9", -0.125f, {{"\xa9", -0.125f}}, 1}};
  auto r = accept(R"({"model": "m", "prompt": "hi", "logprobs": 1})");
  auto lp = json::parse(safe_dump(completion_body(r, s, d)))["choices"][0]["logprobs"];
  CHECK(lp["tokens"] == json::array({"h", "\ufffd", "\ufffd"})); // half characters
  CHECK(lp["token_logprobs"] == json::array({-0.5, -0.25, -0.125}));
  CHECK(lp["top_logprobs"][0] == json{{"h", -0.5}, {"x", -1.5}});
  CHECK(lp["text_offset"] == json::array({0, 1, 1}));

  auto c =
      accept(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "logprobs": true,
                      "top_logprobs": 1, "stream": true})",
             true);
  auto ev = sse_json(sse_chunk(c, s, d, nullptr, false));
  auto content = ev["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 3);
  CHECK(content[0] == json{{"token", "h"},
                           {"logprob", -0.5},
                           {"bytes", {104}},
                           {"top_logprobs",
                            {{{"token", "h"}, {"logprob", -0.5}, {"bytes", {104}}},
                             {{"token", "x"}, {"logprob", -1.5}, {"bytes", {120}}}}}});
  CHECK(content[1]["bytes"] == json::array({0xC3})); // the bytes say what the text cannot
  CHECK(ev["choices"][0]["logprobs"]["refusal"].is_null());
  // Not asked for: null.
  auto plain = accept(R"({"model": "m", "prompt": "hi"})");
  CHECK(json::parse(safe_dump(completion_body(plain, s, d)))["choices"][0]["logprobs"].is_null());
}

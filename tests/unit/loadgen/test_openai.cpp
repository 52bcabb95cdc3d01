#include <catch2/catch.hpp>

#include "loadgen/openai.hpp"

using namespace prfaas::loadgen;

namespace {

std::string chunk(const std::string& text, const std::string& extra = "") {
  return R"(data: {"id":"c1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":")" +
         text + R"(","finish_reason":null}])" + extra + "}\n\n";
}

} // namespace

TEST_CASE("openai: request bodies carry what the gateway's contract asks for") {
  body_options o;
  o.model = "m";
  o.max_tokens = 1024;
  o.seed = 3;
  auto b = request_body(api_kind::completions, "hello", o);
  CHECK(b["model"] == "m");
  CHECK(b["prompt"] == "hello");
  CHECK(b["max_tokens"] == 1024);
  CHECK(b["ignore_eos"] == true);
  CHECK(b["stream"] == true);
  CHECK(b["stream_options"]["include_usage"] == true);
  CHECK(b["seed"] == 3);
  CHECK_FALSE(b.contains("stop"));
  o.stream = false;
  o.stop = "\n";
  auto c = request_body(api_kind::chat, "hi", o);
  CHECK(c["messages"][0]["role"] == "user");
  CHECK(c["messages"][0]["content"] == "hi");
  CHECK_FALSE(c.contains("prompt"));
  CHECK_FALSE(c.contains("stream_options"));
  CHECK(c["stop"] == "\n");
  CHECK(api_path(api_kind::chat) == "/v1/chat/completions");
}

TEST_CASE("openai: a streamed completion gives TTFT, tokens, usage and the prfaas object") {
  response_reader r{api_kind::completions, true};
  r.on_stream_bytes(chunk(""), 0.05); // an empty first chunk is not the first token
  r.on_stream_bytes(chunk("Hel"), 0.20);
  r.on_stream_bytes(chunk("lo") + chunk("!"), 0.30);
  std::string final_chunk =
      R"(data: {"id":"c1","object":"text_completion","choices":[{"index":0,"text":"","finish_reason":"length"}],)"
      R"("prfaas":{"request_id":"r-9","route":"pd","engine_prefill_ms":120.5,"transfer_wire_ms":3.25,"ttft_ms":130,"attempts":2,"prefill_queue_ms":7.5}})"
      "\n\n";
  r.on_stream_bytes(final_chunk, 0.31);
  CHECK(r.output_tokens() == 3); // by chunks, before usage
  r.on_stream_bytes(
      R"(data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}})"
      "\n\ndata: [DONE]\n\n",
      0.32);
  r.on_end(0.33);
  CHECK(r.complete());
  CHECK_FALSE(r.error());
  REQUIRE(r.first_token_s());
  CHECK(*r.first_token_s() == 0.20);
  CHECK(r.output_tokens() == 4); // usage wins
  CHECK(r.text_chunks() == 3);
  CHECK(r.finish_reason() == "length");
  CHECK(r.prfaas().present);
  CHECK(r.prfaas().route == "pd");
  CHECK(r.prfaas().request_id == "r-9");
  CHECK(r.prfaas().engine_prefill_ms == 120.5);
  CHECK(r.prfaas().transfer_wire_ms == 3.25);
  CHECK(r.prfaas().attempts == 2);
  CHECK(r.prfaas().prefill_queue_ms == 7.5);
}

TEST_CASE("openai: a mid-stream error event is a stream error") {
  response_reader r{api_kind::completions, true};
  r.on_stream_bytes(
      chunk("a") +
          R"(data: {"error": {"message": "decode node lost", "type": "server_error", "code": "decode_failed"}})"
          "\n\n",
      0.1);
  r.on_end(0.2);
  CHECK_FALSE(r.complete());
  REQUIRE(r.error());
  CHECK(r.error_kind() == "stream_error");
  CHECK(r.error()->message == "decode node lost");
  CHECK(r.error()->code == "decode_failed");
}

TEST_CASE("openai: truncated or malformed streams are bad responses") {
  response_reader cut{api_kind::completions, true};
  cut.on_stream_bytes(chunk("a") + "data: {\"choi", 0.1);
  cut.on_end(0.2);
  REQUIRE(cut.error());
  CHECK(cut.error_kind() == "bad_response");
  CHECK_THAT(cut.error()->message, Catch::Contains("middle of an event"));

  response_reader no_done{api_kind::completions, true};
  no_done.on_stream_bytes(chunk("a"), 0.1);
  no_done.on_end(0.2);
  REQUIRE(no_done.error());
  CHECK_THAT(no_done.error()->message, Catch::Contains("[DONE]"));

  response_reader junk{api_kind::completions, true};
  junk.on_stream_bytes("data: not json\n\ndata: [DONE]\n\n", 0.1);
  junk.on_end(0.2);
  REQUIRE(junk.error());
  CHECK(junk.error_kind() == "bad_response");
}

TEST_CASE("openai: chat deltas and whole (non-streamed) bodies") {
  response_reader chat{api_kind::chat, true};
  chat.on_stream_bytes(
      R"(data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]})"
      "\n\n",
      0.1);
  chat.on_stream_bytes(
      R"(data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]})"
      "\n\ndata: [DONE]\n\n",
      0.4);
  chat.on_end(0.5);
  CHECK(chat.complete());
  CHECK(*chat.first_token_s() == 0.4);
  CHECK(chat.output_tokens() == 1);

  response_reader whole{api_kind::chat, false};
  whole.on_body(
      R"({"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"xyz"},"finish_reason":"length"}],)"
      R"("usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8},"prfaas":{"route":"prfaas"}})",
      0.9);
  whole.on_end(0.9);
  CHECK(whole.complete());
  CHECK_FALSE(whole.first_token_s());
  CHECK(whole.output_tokens() == 3);
  CHECK(whole.prfaas().route == "prfaas");
  CHECK_FALSE(whole.prfaas().prefill_queue_ms);
}

TEST_CASE("openai: error bodies") {
  auto e = parse_error_body(
      R"({"error":{"message":"too many requests","type":"rate_limit","param":null,"code":"queue_full"}})");
  REQUIRE(e);
  CHECK(e->message == "too many requests");
  CHECK(e->type == "rate_limit");
  CHECK(e->code == "queue_full");
  auto text = parse_error_body("<html>bad gateway</html>");
  REQUIRE(text);
  CHECK(text->message == "<html>bad gateway</html>");
  CHECK_FALSE(parse_error_body(R"({"ok":true})"));
}

#pragma once

// The OpenAI-compatible HTTP contract as plain functions: request bodies in,
// validated requests or errors out; tokens in, response bodies and SSE chunks out.
// No sockets, no actors: unit-tested on its own (tests/unit/gateway).
//
// Tokenisation is byte-level (the engines' vocabulary: one UTF-8 byte of the prompt
// is one token). Output tokens 0..255 render as the code points U+0000..U+00FF, so
// any token stream becomes valid UTF-8 text and the mapping is lossless; the
// profile engine's synthetic tokens (>= 256) render as one letter each. Ask for
// `"return_token_ids": true` to get the ids themselves.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "prfaas/engine/types.hpp"

namespace prfaas::serving {

using json = nlohmann::json;
using engine::token;

/// An error as the client sees it: HTTP status + OpenAI's error object.
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;       ///< offending field; empty = null
  std::string code;        ///< e.g. "model_not_found"; empty = null
  int retry_after_s = 0;   ///< > 0: send Retry-After (429/503)

  json body() const;
};

/// What the gateway accepts; checked before a request is accepted.
struct api_limits {
  std::string model;                ///< the one served model id
  uint32_t max_context = 131072;    ///< prompt + output tokens
  uint32_t max_prompt_tokens = 131072;
  uint32_t max_output_tokens = 16384;
  uint32_t default_max_tokens = 16;
  size_t max_stop = 4;              ///< stop sequences per request
  size_t max_stop_bytes = 64;
};

/// A validated completion request.
struct completion_request {
  bool chat = false;
  std::string model;
  std::vector<token> prompt;
  uint32_t max_tokens = 16;
  float temperature = 1.0f;
  uint64_t seed = 0;
  bool has_seed = false;
  std::vector<std::vector<token>> stop; ///< stop sequences as tokens (empty ones dropped)
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;
  bool return_token_ids = false;
};

/// Parses and validates a /v1/completions (chat = false) or /v1/chat/completions body.
/// Unknown fields are ignored (clients send many); known fields of the wrong type or
/// out of range are a 400 naming the field.
std::variant<completion_request, api_error> parse_completion(std::string_view body, bool chat,
                                                             const api_limits& limits);

/// The prompt a chat conversation becomes (a fixed, documented template):
///   "<|system|>\n...\n<|user|>\n...\n<|assistant|>\n"
std::string chat_prompt(const json& messages);

/// Byte-level tokenisation of prompt text.
std::vector<token> tokenize(std::string_view text);
/// Text of output tokens (see the file comment). `eos` renders as nothing.
std::string detokenize(const std::vector<token>& tokens, token eos);
/// A stop string as tokens; nullopt when it contains a code point above U+00FF (it can
/// never match output text then).
std::optional<std::vector<token>> stop_tokens(std::string_view stop);

/// Everything the final response or chunk reports.
struct completion_summary {
  std::string id;             ///< "cmpl-<request id>"
  std::string model;
  int64_t created = 0;        ///< unix seconds
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  std::string finish_reason;  ///< "length" | "stop"
  json prfaas;                ///< route, nodes, timings (our extension)
};

/// Non-streaming response body.
json completion_body(const completion_request& r, const completion_summary& s,
                     const std::vector<token>& tokens, token eos);
/// One SSE event "data: {...}\n\n" carrying `tokens` (may be empty for the role
/// chunk of chat); `finish` non-null on the last chunk.
std::string sse_chunk(const completion_request& r, const completion_summary& s,
                      const std::vector<token>& tokens, token eos, const std::string* finish,
                      bool first);
/// The usage chunk (stream_options.include_usage).
std::string sse_usage(const completion_request& r, const completion_summary& s);
/// An error event in the stream, followed by the terminator.
std::string sse_error(const api_error& e);
/// JSON text of `j`; invalid UTF-8 in strings is replaced, never thrown on.
std::string safe_dump(const json& j);
inline constexpr const char* sse_done = "data: [DONE]\n\n";

} // namespace prfaas::serving

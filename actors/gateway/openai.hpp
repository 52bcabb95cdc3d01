#pragma once

// The OpenAI-compatible HTTP contract as plain functions: request bodies in,
// validated requests or errors out; output text in, response bodies and SSE chunks
// out. No sockets, no actors: unit-tested on its own (tests/unit/gateway).
//
// Every field of OpenAI's completion and chat-completion request schemas is either
// honoured or refused with a 400 that names it; so is any field OpenAI does not define
// (besides prfaas's own extensions ignore_eos and return_token_ids). The table is in
// docs/openai.md. Prompts become tokens through the model's tokenizer (engine::
// tokenizer: a GGUF's vocabulary and chat template, or the byte-level one of the
// reference and profile engines).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/output_text.hpp"
#include "prfaas/engine/tokenizer.hpp"
#include "prfaas/engine/types.hpp"

namespace prfaas::serving {

using json = nlohmann::json;
using engine::token;

/// An error as the client sees it: HTTP status + OpenAI's error object.
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;     ///< offending field; empty = null
  std::string code;      ///< e.g. "model_not_found"; empty = null
  int retry_after_s = 0; ///< > 0: send Retry-After (429/503)

  json body() const;
};

/// What the gateway accepts; checked before a request is accepted.
struct api_limits {
  std::string model;             ///< the one served model id
  uint32_t max_context = 131072; ///< prompt + output tokens
  uint32_t max_prompt_tokens = 131072;
  uint32_t max_output_tokens = 16384;
  uint32_t default_max_tokens = 16;
  size_t max_stop = 4; ///< stop sequences per request
  size_t max_stop_bytes = 64;
  /// Whether the engine samples from a distribution it can report (not the profile
  /// engine, which models timings only): logprobs are refused otherwise.
  bool logprobs = true;
};

/// A validated completion request.
struct completion_request {
  bool chat = false;
  std::string model;
  std::vector<token> prompt;
  std::string prompt_text; ///< what the prompt was as text (echo); empty for token ids
  uint32_t max_tokens = 16;
  float temperature = 1.0f;
  float top_p = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias; ///< sorted by token
  int32_t logprobs = -1; ///< -1: none; n: the sampled token's and the n most likely
  uint64_t seed = 0;
  bool has_seed = false;
  std::vector<std::string> stop; ///< stop strings (empty ones dropped)
  bool stream = false;
  bool include_usage = false;
  bool echo = false; ///< completions: the prompt's text precedes the output
  bool ignore_eos = false;
  bool return_token_ids = false;
  std::string user; ///< user / safety_identifier / prompt_cache_key: logged

  /// What the engine samples with (first_index 0).
  engine::sampling_params sampling() const;
};

/// Parses and validates a /v1/completions (chat = false) or /v1/chat/completions body,
/// tokenizing the prompt (or rendering the chat through the model's template) with
/// `tok`. Every field is honoured or refused: a 400 names it.
std::variant<completion_request, api_error> parse_completion(std::string_view body, bool chat,
                                                             const api_limits& limits,
                                                             const engine::tokenizer& tok);

/// Byte-level tokenisation of prompt text (the trace replays' and the simulator's).
std::vector<token> tokenize(std::string_view text);

/// Everything the final response or chunk reports.
struct completion_summary {
  std::string id; ///< "cmpl-<request id>"
  std::string model;
  int64_t created = 0; ///< unix seconds
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0; ///< prompt tokens a prefix cache supplied
  std::string finish_reason;  ///< "length" | "stop"
  json prfaas;                ///< route, nodes, timings (our extension)
};

/// Non-streaming response body: the whole output.
json completion_body(const completion_request& r, const completion_summary& s,
                     const output_delta& out);
/// One SSE event "data: {...}\n\n" carrying `d` (may be empty for the role chunk of
/// chat); `finish` non-null on the last chunk; `first` for the first (chat: the role;
/// completions with echo: the prompt's text before the output).
std::string sse_chunk(const completion_request& r, const completion_summary& s,
                      const output_delta& d, const std::string* finish, bool first);
/// The usage chunk (stream_options.include_usage).
std::string sse_usage(const completion_request& r, const completion_summary& s);
/// An error event in the stream, followed by the terminator.
std::string sse_error(const api_error& e);
/// JSON text of `j`; invalid UTF-8 in strings is replaced, never thrown on.
std::string safe_dump(const json& j);
inline constexpr const char* sse_done = "data: [DONE]\n\n";

} // namespace prfaas::serving

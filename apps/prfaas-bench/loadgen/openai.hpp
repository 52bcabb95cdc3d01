#pragma once

// The OpenAI-compatible API as prfaas's gateway speaks it: request bodies, and the
// reading of a response (streamed chunks or one body) into what the load generator
// measures. No I/O here: the HTTP client feeds bytes and clock readings in.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/sse.hpp"

namespace prfaas::loadgen {

enum class api_kind { completions, chat };

api_kind parse_api_kind(const std::string& name); ///< "completions" | "chat"
std::string to_string(api_kind k);
/// "/v1/completions" or "/v1/chat/completions".
std::string api_path(api_kind k);

struct body_options {
  std::string model;
  uint32_t max_tokens = 1024;
  double temperature = 0;
  std::optional<uint64_t> seed;
  std::optional<std::string> stop;
  bool stream = true;
  /// Ask for the output's token ids (`return_token_ids`), for a checker of the tokens.
  bool token_ids = false;
};

/// The JSON body of one request: the prompt (as the user message for chat), with
/// `ignore_eos` so the output has the requested length and, when streaming,
/// `stream_options.include_usage` so the last chunk reports token counts.
nlohmann::json request_body(api_kind k, const std::string& prompt, const body_options& o);

/// The `prfaas` object the gateway adds to a response's final chunk.
struct prfaas_info {
  bool present = false;
  std::string request_id;
  std::string route; ///< "prfaas" or "pd"
  double engine_prefill_ms = 0;
  double transfer_wire_ms = 0;
  double ttft_ms = 0; ///< measured by the server
  int attempts = 0;
  /// Time waiting for a prefill engine, when the gateway reports it: under load most
  /// of the overhead above is this queue.
  std::optional<double> prefill_queue_ms;
  std::string prefill_node; ///< the node whose worker ran the prefill
};

/// `{"error": {"message", "type", "code", ...}}` as found in a body or an SSE event.
struct api_error {
  std::string message;
  std::string type;
  std::string code;
};

/// The error object of `body`, if it is one; a body that is not JSON gives its first
/// 200 bytes as the message.
std::optional<api_error> parse_error_body(std::string_view body);

/// Reads one response. Times are seconds since the request was sent, supplied by the
/// caller with each piece.
class response_reader {
public:
  response_reader(api_kind k, bool stream) : kind_(k), stream_(stream) {}

  /// Bytes of a streamed (SSE) 200 response, received at time `t`.
  void on_stream_bytes(std::string_view bytes, double t);
  /// One SSE data payload received at `t` (on_stream_bytes calls this per event).
  void on_event_data(std::string_view data, double t);
  /// The whole body of a non-streamed 200 response.
  void on_body(std::string_view body, double t);
  /// The response has ended (connection closed or body complete).
  void on_end(double t);

  /// True when the response is complete and well formed: [DONE] after streaming, a
  /// parsed body otherwise, with no error event.
  bool complete() const { return complete_ && !error_; }
  bool done_seen() const { return done_; }
  /// A mid-stream error event or a malformed response, if any; the first one wins.
  const std::optional<api_error>& error() const { return error_; }
  /// "stream_error" (an error event from the server) or "bad_response" (ours).
  const std::string& error_kind() const { return error_kind_; }

  /// Time of the first chunk with non-empty text (streaming only).
  std::optional<double> first_token_s() const { return first_token_s_; }
  std::optional<double> end_s() const { return end_s_; }
  /// Output tokens: usage.completion_tokens when reported, else text chunks (streaming)
  /// or 0 (non-streaming without usage).
  uint32_t output_tokens() const;
  std::optional<uint32_t> usage_prompt_tokens() const { return prompt_tokens_; }
  std::optional<uint32_t> usage_completion_tokens() const { return completion_tokens_; }
  uint32_t text_chunks() const { return text_chunks_; }
  size_t text_bytes() const { return text_bytes_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const prfaas_info& prfaas() const { return prfaas_; }
  /// The output's token ids, in order, when the response carried them (token_ids).
  const std::vector<int64_t>& token_ids() const { return token_ids_; }

private:
  void fail(std::string kind, api_error e);
  void absorb(const nlohmann::json& j, double t, bool chunk);

  api_kind kind_;
  bool stream_;
  sse_parser parser_;
  bool done_ = false;
  bool complete_ = false;
  std::optional<api_error> error_;
  std::string error_kind_;
  std::optional<double> first_token_s_, end_s_;
  std::optional<uint32_t> prompt_tokens_, completion_tokens_;
  uint32_t text_chunks_ = 0;
  size_t text_bytes_ = 0;
  std::string finish_reason_;
  prfaas_info prfaas_;
  std::vector<int64_t> token_ids_;
};

} // namespace prfaas::loadgen

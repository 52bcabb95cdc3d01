#pragma once

// The gateway's HTTP side (cpp-httplib): the OpenAI-compatible endpoints, request
// validation, admission, and streaming each accepted request's output from its
// stream_channel. Knows nothing of actors: accepted requests go to `submit`, and
// the gateway actor feeds the channel.
//
//   POST /v1/completions, POST /v1/chat/completions   (stream or not)
//   GET  /v1/models, GET /health, GET /metrics
//
// Status codes: 400 bad field (named in error.param), 401 missing or wrong API key
// (when keys are configured; /v1/* only: /health and /metrics stay open for probes and
// scrapers), 404 unknown model or path, 405 wrong method, 413 body or prompt too large,
// 429 too many requests in flight, in all or for the key (Retry-After), 503 no
// capacity / shutting down (Retry-After), 504 deadline.
// A streaming request commits to status 200 only when its first token is ready, so
// a request that fails before that still gets a proper status code.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gateway/api_keys.hpp"
#include "gateway/openai.hpp"
#include "gateway/stream_channel.hpp"
#include "prfaas/runtime/log.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
} // namespace httplib

namespace prfaas::serving {

/// An accepted request on its way to the gateway actor.
struct accepted_request {
  std::string id;
  completion_request req;
  std::shared_ptr<stream_channel> channel;
  std::chrono::steady_clock::time_point accepted;
};

struct http_settings {
  std::string host = "127.0.0.1";
  int port = 8000;                            ///< 0 = any free port
  size_t max_body = 16u << 20;                ///< bytes
  size_t threads = 256;                       ///< concurrent connections served
  uint32_t max_inflight = 1024;               ///< accepted and not ended; beyond: 429
  std::chrono::milliseconds deadline{120000}; ///< per request, from acceptance
  std::vector<std::string> api_keys;          ///< accepted bearer keys; empty = no authentication
  uint32_t max_concurrent_per_key = 0;        ///< requests in flight per key; 0 = no limit
};

class http_frontend {
public:
  struct hooks {
    /// Hands an accepted request to the gateway; false when it cannot take it (stopping).
    std::function<bool(std::shared_ptr<accepted_request>)> submit;
    std::function<std::string()> metrics_text;
    std::function<std::string()> health_json;
    std::function<std::string()> next_id;
  };

  http_frontend(http_settings s, api_limits limits, hooks h, logger_ptr log,
                std::shared_ptr<std::atomic<uint32_t>> inflight,
                std::shared_ptr<const engine::tokenizer> tok);
  ~http_frontend();

  /// Binds and starts serving; throws std::runtime_error naming host:port on failure.
  void start();
  /// Stops accepting, ends the listener thread. Idempotent.
  void stop();
  int port() const { return port_; }

  /// Puts the API's routes and error handling on `srv`. start() does it on the server
  /// it binds; fuzz/fuzz_http_server drives them through httplib without a socket.
  void install_routes(httplib::Server& srv);

private:
  using time_point = std::chrono::steady_clock::time_point;

  /// The 401 for a /v1/* request without a configured key; nullopt lets it through.
  std::optional<api_error> refuse_unauthenticated(const httplib::Request& req) const;
  /// Authentication, body size, the OpenAI error shape for httplib's own errors, 405s.
  void install_guards(httplib::Server& srv);
  /// /health, /metrics, /v1/models.
  void install_info(httplib::Server& srv);
  /// POST /v1/completions (chat: /v1/chat/completions), start to end.
  void serve_completion(const httplib::Request& hreq, httplib::Response& res, bool chat);
  /// Parses, takes the key's slot and an in-flight place, hands the request to the
  /// gateway; nullptr after answering with the error.
  std::shared_ptr<accepted_request> admit(const httplib::Request& hreq, httplib::Response& res,
                                          bool chat, api_slot& slot);
  /// The first update (output, result or error); nullopt after answering with the error.
  std::optional<stream_update> await_first(stream_channel& ch, time_point deadline,
                                           httplib::Response& res);
  /// A non-streaming request: the whole completion in one JSON body.
  void reply_whole(httplib::Response& res, const accepted_request& a, stream_update first,
                   time_point deadline);
  /// A streaming request: server-sent events until the result, an error or the deadline.
  void reply_stream(httplib::Response& res, const accepted_request& a, stream_update first,
                    time_point deadline, api_slot slot);

  http_settings s_;
  api_limits limits_;
  std::shared_ptr<const engine::tokenizer> tok_; ///< the model's; shared with the gateway actor
  api_key_guard keys_;
  int64_t started_; ///< unix seconds: the model's "created" in /v1/models
  hooks h_;
  logger_ptr log_;
  std::shared_ptr<std::atomic<uint32_t>> inflight_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool stopped_ = false;
};

} // namespace prfaas::serving

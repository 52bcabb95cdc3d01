#include "gateway/http_frontend.hpp"

#include <ctime>

#include <sys/socket.h>

#include <httplib.h>

namespace prfaas::serving {

namespace {

void send_error(httplib::Response& res, const api_error& e) {
  res.status = e.status;
  if (e.retry_after_s > 0)
    res.set_header("Retry-After", std::to_string(e.retry_after_s));
  res.set_content(safe_dump(e.body()), "application/json");
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

/// One call of a streaming response's content provider: writes what the last update
/// brought (the first chunk even when empty), ends the stream on a result, an error or
/// the deadline, else waits for the next update. False: the client is gone.
bool stream_step(stream_channel& ch, std::pair<stream_update, bool>& state,
                 const completion_request& req, const completion_summary& head,
                 std::chrono::steady_clock::time_point deadline, httplib::DataSink& sink) {
  auto& [u, first_chunk] = state;
  if (!u.out.empty() || first_chunk) {
    auto s = sse_chunk(req, head, u.out, nullptr, first_chunk);
    first_chunk = false;
    u.out = {};
    if (!sink.write(s.data(), s.size())) {
      ch.abandon();
      return false;
    }
  }
  if (u.finished) {
    auto summary = *u.finished;
    summary.id = head.id;
    summary.created = head.created;
    std::string out = sse_chunk(req, summary, {}, &summary.finish_reason, false);
    if (req.include_usage)
      out += sse_usage(req, summary);
    out += sse_done;
    sink.write(out.data(), out.size());
    sink.done();
    return true;
  }
  if (u.error) {
    auto out = sse_error(*u.error);
    sink.write(out.data(), out.size());
    sink.done();
    return true;
  }
  if (std::chrono::steady_clock::now() > deadline) {
    ch.abandon();
    auto out = sse_error({.status = 504, .message = "request timed out", .type = "server_error"});
    sink.write(out.data(), out.size());
    sink.done();
    return true;
  }
  if (!sink.is_writable()) {
    ch.abandon();
    return false;
  }
  auto next = ch.next(std::chrono::milliseconds(200));
  if (next)
    u = std::move(*next);
  return true;
}

} // namespace

http_frontend::http_frontend(http_settings s, api_limits limits, hooks h, logger_ptr log,
                             std::shared_ptr<std::atomic<uint32_t>> inflight,
                             std::shared_ptr<const engine::tokenizer> tok)
    : s_(std::move(s)), limits_(std::move(limits)), tok_(std::move(tok)),
      keys_(s_.api_keys, s_.max_concurrent_per_key), started_(unix_now()), h_(std::move(h)),
      log_(std::move(log)), inflight_(std::move(inflight)) {}

http_frontend::~http_frontend() {
  stop();
}

void http_frontend::start() {
  server_ = std::make_unique<httplib::Server>();
  auto threads = s_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_tcp_nodelay(true); // small SSE chunks must not wait for Nagle + delayed ACK (40 ms)
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  install_routes(*server_);
  // cpp-httplib listens with a backlog of 5 (a compile-time constant of the Debian
  // library): a burst of connections overflows the accept queue and clients stall
  // for a SYN-ACK retransmit, or fail. Remember the listening socket and widen its
  // backlog after binding (Linux lets listen() be called again to change it).
  auto listen_fd = std::make_shared<std::atomic<int>>(-1);
  server_->set_socket_options([listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    int expected = -1;
    listen_fd->compare_exchange_strong(expected, static_cast<int>(sock));
  });
  bool bound = s_.port == 0 ? (port_ = server_->bind_to_any_port(s_.host)) > 0
                            : server_->bind_to_port(s_.host, s_.port);
  if (!bound)
    throw std::runtime_error("gateway: cannot listen on " + s_.host + ":" +
                             std::to_string(s_.port) + " (address in use or not local)");
  if (s_.port != 0)
    port_ = s_.port;
  if (int fd = listen_fd->load(); fd >= 0)
    ::listen(fd, 4096);
  thread_ = std::thread([srv = server_.get()] { srv->listen_after_bind(); });
  log_->info("gateway_listening http={}:{}", s_.host, port_);
}

void http_frontend::stop() {
  if (stopped_ || !server_)
    return;
  stopped_ = true;
  server_->stop();
  if (thread_.joinable())
    thread_.join();
}

std::optional<api_error> http_frontend::refuse_unauthenticated(const httplib::Request& req) const {
  if (!keys_.enabled() || req.path.rfind("/v1/", 0) != 0)
    return std::nullopt;
  auto who = keys_.authenticate(req.get_header_value("Authorization"));
  auto* e = std::get_if<api_error>(&who);
  if (e)
    log_->info("api_key_refused path={} remote={} reason=\"{}\"", req.path, req.remote_addr,
               e->message);
  return e ? std::optional<api_error>{*e} : std::nullopt;
}

void http_frontend::install_routes(httplib::Server& srv) {
  install_guards(srv);
  install_info(srv);
  for (bool chat : {false, true})
    srv.Post(chat ? "/v1/chat/completions" : "/v1/completions",
             [this, chat](const httplib::Request& hreq, httplib::Response& res) {
               serve_completion(hreq, res, chat);
             });
}

void http_frontend::install_guards(httplib::Server& srv) {
  srv.set_payload_max_length(s_.max_body); // beyond: 413, from the error handler below
  // Authentication comes before routing, so an unauthenticated client cannot make the
  // gateway read (up to max_body of) its body. The body is left unread: close.
  srv.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto refused = refuse_unauthenticated(req);
    if (!refused)
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");
    send_error(res, *refused);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Anything httplib itself rejects (413 over max_body, 404 unknown path, 400
  // unparsable HTTP) gets OpenAI's error shape too.
  srv.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty())
      return;
    api_error e{.status = res.status};
    switch (res.status) {
    case 413:
      e.message = "request body exceeds " + std::to_string(s_.max_body) + " bytes";
      break;
    case 404:
      e.message = "no such endpoint: " + req.method + " " + req.path;
      e.code = "not_found";
      break;
    case 405:
      e.message = "method " + req.method + " not allowed on " + req.path;
      break;
    default:
      e.message = "HTTP error " + std::to_string(res.status);
      if (res.status >= 500)
        e.type = "server_error";
    }
    send_error(res, e);
  });
  // A known path with the wrong method is 405 with Allow (httplib alone would say 404).
  auto not_allowed = [](const char* allow) {
    return [allow](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allow);
      send_error(res, {.status = 405,
                       .message = "method " + req.method + " not allowed on " + req.path +
                                  " (allowed: " + allow + ")"});
    };
  };
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    srv.Get(path, not_allowed("POST"));
    srv.Put(path, not_allowed("POST"));
    srv.Patch(path, not_allowed("POST"));
    srv.Delete(path, not_allowed("POST"));
  }
  for (const char* path : {"/v1/models", "/health", "/metrics"}) {
    srv.Post(path, not_allowed("GET"));
    srv.Put(path, not_allowed("GET"));
    srv.Patch(path, not_allowed("GET"));
    srv.Delete(path, not_allowed("GET"));
  }
}

void http_frontend::install_info(httplib::Server& srv) {
  srv.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(h_.health_json(), "application/json");
  });
  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(h_.metrics_text(), "text/plain; version=0.0.4");
  });
  srv.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"object", "list"},
              {"data", json::array({{{"id", limits_.model},
                                     {"object", "model"},
                                     {"created", started_},
                                     {"owned_by", "prfaas"},
                                     {"max_model_len", limits_.max_context}}})}};
    res.set_content(safe_dump(m), "application/json");
  });
}

void http_frontend::serve_completion(const httplib::Request& hreq, httplib::Response& res,
                                     bool chat) {
  api_slot slot;
  auto a = admit(hreq, res, chat, slot);
  if (!a)
    return;
  const auto deadline = a->accepted + s_.deadline + std::chrono::seconds(5);
  auto first = await_first(*a->channel, deadline, res);
  if (!first)
    return;
  if (!a->req.stream)
    reply_whole(res, *a, std::move(*first), deadline);
  else
    reply_stream(res, *a, std::move(*first), deadline, std::move(slot));
}

std::shared_ptr<accepted_request> http_frontend::admit(const httplib::Request& hreq,
                                                       httplib::Response& res, bool chat,
                                                       api_slot& slot) {
  auto parsed = parse_completion(hreq.body, chat, limits_, *tok_);
  if (auto* e = std::get_if<api_error>(&parsed)) {
    send_error(res, *e);
    return nullptr;
  }
  auto a = std::make_shared<accepted_request>();
  a->req = std::move(std::get<completion_request>(parsed));
  // The pre-routing handler let only configured keys (or, without keys, anyone) in.
  auto key = keys_.authenticate(hreq.get_header_value("Authorization"));
  auto acquired = keys_.acquire(std::get_if<std::string>(&key) ? std::get<std::string>(key) : "");
  if (auto* e = std::get_if<api_error>(&acquired)) {
    send_error(res, *e);
    return nullptr;
  }
  slot = std::get<api_slot>(acquired);
  if (inflight_->fetch_add(1) >= s_.max_inflight) {
    inflight_->fetch_sub(1);
    send_error(res, {.status = 429,
                     .message = "too many requests in flight (" + std::to_string(s_.max_inflight) +
                                "); retry later",
                     .type = "rate_limit_error",
                     .retry_after_s = 1});
    return nullptr;
  }
  a->id = h_.next_id();
  a->channel = std::make_shared<stream_channel>();
  a->accepted = std::chrono::steady_clock::now();
  if (!h_.submit(a)) {
    inflight_->fetch_sub(1);
    send_error(res, {.status = 503,
                     .message = "the gateway is shutting down",
                     .type = "server_error",
                     .retry_after_s = 1});
    return nullptr;
  }
  return a;
}

std::optional<stream_update> http_frontend::await_first(stream_channel& ch, time_point deadline,
                                                        httplib::Response& res) {
  // Wait for the first output (or the end). A request that fails before its first
  // token gets a proper status code, streaming or not.
  stream_update first;
  while (first.out.empty() && !first.finished && !first.error) {
    if (std::chrono::steady_clock::now() > deadline) {
      ch.abandon(); // the gateway's own deadline should have ended it; never hang
      send_error(res, {.status = 504, .message = "request timed out", .type = "server_error"});
      return std::nullopt;
    }
    auto u = ch.next(std::chrono::milliseconds(200));
    if (!u)
      break;
    first = std::move(*u);
  }
  if (first.error && first.out.empty()) {
    send_error(res, *first.error);
    return std::nullopt;
  }
  return first;
}

void http_frontend::reply_whole(httplib::Response& res, const accepted_request& a,
                                stream_update first, time_point deadline) {
  auto& ch = *a.channel;
  output_delta out = std::move(first.out);
  std::optional<completion_summary> done = std::move(first.finished);
  std::optional<api_error> error = std::move(first.error);
  while (!done && !error) {
    if (std::chrono::steady_clock::now() > deadline) {
      ch.abandon();
      error = api_error{.status = 504, .message = "request timed out", .type = "server_error"};
      break;
    }
    auto u = ch.next(std::chrono::milliseconds(200));
    if (!u)
      break;
    out.append(std::move(u->out));
    done = std::move(u->finished);
    error = std::move(u->error);
  }
  if (error || !done) {
    send_error(res, error ? *error
                          : api_error{.status = 500,
                                      .message = "stream ended without a result",
                                      .type = "server_error"});
    return;
  }
  res.set_content(safe_dump(completion_body(a.req, *done, out)), "application/json");
}

void http_frontend::reply_stream(httplib::Response& res, const accepted_request& a,
                                 stream_update first, time_point deadline, api_slot slot) {
  // Streaming: SSE from here on; the status is 200 and errors become error events.
  auto state = std::make_shared<std::pair<stream_update, bool>>(std::move(first), true);
  completion_summary head{.id = "cmpl-" + a.id, .model = limits_.model, .created = unix_now()};
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Request-Id", a.id);
  res.set_chunked_content_provider(
      "text/event-stream",
      // The key's slot lives as long as the stream.
      [ch = a.channel, state, req = a.req, head, deadline,
       slot = std::move(slot)](size_t, httplib::DataSink& sink) mutable {
        return stream_step(*ch, *state, req, head, deadline, sink);
      },
      [ch = a.channel](bool success) {
        if (!success)
          ch->abandon(); // the client went away mid-stream
      });
}

} // namespace prfaas::serving

// libFuzzer target: raw bytes from a TCP client, through cpp-httplib's request parsing
// (request line, headers, chunked bodies, keep-alive) and the gateway's real routes,
// error handler and API-key check, with a stand-in gateway that answers at once. A
// memory stream replaces the socket. cpp-httplib is Debian's shared library, not
// instrumented: the fuzzer steers by the coverage of our code, and ASan sees the
// library's memory only through the allocator and string interceptors.

#include <algorithm>
#include <cstring>

#include <httplib.h>
#include <spdlog/sinks/null_sink.h>

#include "gateway/http_frontend.hpp"

namespace {

using namespace prfaas::serving;

/// A client's bytes in, the server's bytes discarded.
class memory_stream final : public httplib::Stream {
public:
  memory_stream(const char* data, size_t size) : data_(data), size_(size) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, size_ - at_);
    std::memcpy(ptr, data_ + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char*, size_t size) override { return static_cast<ssize_t>(size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8000;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  bool exhausted() const { return at_ >= size_; }

private:
  const char* data_;
  size_t size_;
  size_t at_ = 0;
};

/// httplib's request processing, minus the socket.
class socketless_server final : public httplib::Server {
public:
  using httplib::Server::process_request;
};

struct fixture {
  std::shared_ptr<std::atomic<uint32_t>> inflight = std::make_shared<std::atomic<uint32_t>>(0);
  std::unique_ptr<http_frontend> frontend;
  socketless_server server;

  fixture() {
    http_settings s;
    s.max_body = 4096;
    s.max_inflight = 1u << 30;
    s.api_keys = {"sk-test-key"};
    s.max_concurrent_per_key = 4;
    api_limits limits{.model = "m",
                      .max_context = 4096,
                      .max_prompt_tokens = 1024,
                      .max_output_tokens = 512,
                      .default_max_tokens = 16};
    http_frontend::hooks h;
    // The stand-in gateway: echoes a few prompt tokens and finishes at once.
    h.submit = [](std::shared_ptr<accepted_request> a) {
      auto n = std::min<size_t>(a->req.prompt.size(), 8);
      output_delta d;
      d.tokens.assign(a->req.prompt.begin(), a->req.prompt.begin() + static_cast<ptrdiff_t>(n));
      for (auto t : d.tokens)
        d.text += static_cast<char>(t & 0x7F); // ASCII, as a detokenizer's text is UTF-8
      a->channel->push(std::move(d));
      a->channel->finish({.prompt_tokens = static_cast<uint32_t>(a->req.prompt.size()),
                          .completion_tokens = static_cast<uint32_t>(n),
                          .finish_reason = "length"});
      return true;
    };
    h.metrics_text = [] { return std::string{"prfaas_up 1\n"}; };
    h.health_json = [] { return std::string{"{\"status\":\"ok\"}"}; };
    h.next_id = [] { return std::string{"fuzz-1"}; };
    auto log =
        std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
    frontend = std::make_unique<http_frontend>(s, limits, h, log, inflight,
                                               std::make_shared<prfaas::engine::byte_tokenizer>());
    frontend->install_routes(server);
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fixture f;
  f.inflight->store(0);
  memory_stream in{reinterpret_cast<const char*>(data), size};
  // Keep-alive: several requests may share the bytes, as on one connection.
  for (int i = 0; i < 8 && !in.exhausted(); ++i) {
    bool closed = false;
    if (!f.server.process_request(in, false, closed, [](httplib::Request&) {}) || closed)
      break;
  }
  return 0;
}

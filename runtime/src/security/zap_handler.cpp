#include "zap_handler.hpp"

#include <pthread.h>

#include <cerrno>

#include <zmq_addon.hpp>

namespace prfaas::detail {

namespace {

constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";

std::string text(const zmq::message_t& m) {
  return std::string{static_cast<const char*>(m.data()), m.size()};
}

std::string z85_of(const zmq::message_t& m) {
  if (m.size() != 32)
    return {};
  char out[41] = {};
  zmq_z85_encode(out, static_cast<const uint8_t*>(m.data()), m.size());
  return out;
}

/// One handler per live context. Weak: the handler ends with its last registration.
std::mutex registry_mtx;
std::map<void*, std::weak_ptr<zap_handler>>& registry() {
  static std::map<void*, std::weak_ptr<zap_handler>> handlers;
  return handlers;
}

} // namespace

zap_handler::zap_handler(zmq::context_t& ctx) : rep_(ctx, zmq::socket_type::rep) {
  rep_.set(zmq::sockopt::linger, 0);
  rep_.bind(zap_endpoint);
  thread_ = std::thread{[this] {
    pthread_setname_np(pthread_self(), "prfaas.zap");
    run();
  }};
}

zap_handler::~zap_handler() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
  rep_.close();
}

std::shared_ptr<zap_handler> zap_handler::of(zmq::context_t& ctx) {
  std::lock_guard<std::mutex> guard{registry_mtx};
  auto& handlers = registry();
  for (auto i = handlers.begin(); i != handlers.end();)
    i = i->second.expired() ? handlers.erase(i) : std::next(i);
  if (auto h = handlers[ctx.handle()].lock())
    return h;
  auto h = std::make_shared<zap_handler>(ctx);
  handlers[ctx.handle()] = h;
  return h;
}

uint64_t zap_handler::add(const std::string& domain, security_ptr sec, std::string plane) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto token = next_token_++;
  domains_[domain] = domain_entry{token, std::move(sec), std::move(plane)};
  return token;
}

void zap_handler::remove(const std::string& domain, uint64_t token) {
  std::lock_guard<std::mutex> guard{mtx_};
  // A newer registration of the same domain (a restarted socket) stays.
  if (auto i = domains_.find(domain); i != domains_.end() && i->second.token == token)
    domains_.erase(i);
}

void zap_handler::run() {
  while (!stop_) {
    zmq::pollitem_t item{rep_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      if (!(item.revents & ZMQ_POLLIN))
        continue;
      std::vector<zmq::message_t> request;
      if (!zmq::recv_multipart(rep_, std::back_inserter(request)))
        continue;
      auto reply = decide(request);
      // RFC 27: version, request id, status code, status text, user id, metadata.
      std::string request_id = request.size() > 1 ? text(request[1]) : std::string{};
      std::vector<zmq::const_buffer> out{zmq::buffer(std::string_view{"1.0"}),
                                         zmq::buffer(request_id),
                                         zmq::buffer(reply[0]),
                                         zmq::buffer(reply[1]),
                                         zmq::buffer(reply[2]),
                                         zmq::const_buffer{}};
      zmq::send_multipart(rep_, out);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM)
        return;
    }
  }
}

std::vector<std::string> zap_handler::decide(const std::vector<zmq::message_t>& request) {
  // version, request id, domain, address, identity, mechanism, credentials...
  if (request.size() < 6 || text(request[0]) != "1.0")
    return {"500", "malformed ZAP request", ""};
  const auto domain = text(request[2]);
  const auto mechanism = text(request[5]);
  domain_entry entry;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = domains_.find(domain);
    if (i == domains_.end())
      return {"400", "unknown ZAP domain", ""};
    entry = i->second;
  }
  auth_refusal r{.plane = entry.plane, .address = text(request[3])};
  if (mechanism != "CURVE") {
    r.reason = "mechanism";
  } else {
    r.key = request.size() > 6 ? z85_of(request[6]) : std::string{};
    if (auto who = entry.sec->allowed.find(r.key);
        !r.key.empty() && who != entry.sec->allowed.end())
      return {"200", "OK", who->second}; // the user id names the peer's node
    r.reason = "unknown_key";
  }
  if (entry.sec->on_refused)
    entry.sec->on_refused(r);
  return {"400", r.reason, ""};
}

} // namespace prfaas::detail

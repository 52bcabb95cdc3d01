#pragma once

// The ZAP handler (ZeroMQ RFC 27) of one ZeroMQ context: a REP socket bound to
// inproc://zeromq.zap.01 that libzmq asks, during every CURVE handshake on that
// context's server sockets, whether the client's public key may connect. Each server
// socket names its ZAP domain ("<node>/<plane>"); the handler answers from that
// domain's node_security and reports refusals through its `on_refused`.
//
// One handler per context, shared: several nodes of one process may share a context
// (prfaas-node --all). It lives while any server socket of the context is registered.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "prfaas/runtime/security.hpp"

namespace prfaas::detail {

class zap_handler {
public:
  /// Binds the ZAP endpoint of `ctx` and starts answering. Throws zmq::error_t when
  /// something else already bound it.
  explicit zap_handler(zmq::context_t& ctx);
  ~zap_handler();

  zap_handler(const zap_handler&) = delete;
  zap_handler& operator=(const zap_handler&) = delete;

  /// The context's handler, started on first use.
  static std::shared_ptr<zap_handler> of(zmq::context_t& ctx);

  /// Answers for `domain` from `sec` until `remove(domain, token)`; returns the token.
  uint64_t add(const std::string& domain, security_ptr sec, std::string plane);
  void remove(const std::string& domain, uint64_t token);

private:
  struct domain_entry {
    uint64_t token = 0;
    security_ptr sec;
    std::string plane;
  };

  void run();
  /// The reply frames (status code, text, user id) to one request.
  std::vector<std::string> decide(const std::vector<zmq::message_t>& request);

  zmq::socket_t rep_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mtx_;
  std::map<std::string, domain_entry> domains_;
  uint64_t next_token_ = 1;
};

} // namespace prfaas::detail

namespace prfaas {

/// Keeps one server socket's domain registered with its context's ZAP handler.
class zap_registration {
public:
  zap_registration(std::shared_ptr<detail::zap_handler> h, std::string domain, uint64_t token)
      : handler_(std::move(h)), domain_(std::move(domain)), token_(token) {}
  ~zap_registration() { handler_->remove(domain_, token_); }

  zap_registration(const zap_registration&) = delete;
  zap_registration& operator=(const zap_registration&) = delete;

private:
  std::shared_ptr<detail::zap_handler> handler_;
  std::string domain_;
  uint64_t token_;
};

} // namespace prfaas

#include "prfaas/runtime/security.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "zap_handler.hpp"

// ZMQ_ZAP_ENFORCE_DOMAIN is in libzmq 4.3's DRAFT API, which Debian's build leaves out
// of zmq.h, but the library itself implements the option (checked with
// zmq_getsockopt on 4.3.4). Without it a server whose ZAP handler is missing would
// let every CURVE client in.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

namespace prfaas {

bool curve_available() {
  return zmq_has("curve") != 0;
}

curve_keypair generate_curve_keypair() {
  char pub[41] = {};
  char sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0)
    throw std::runtime_error(std::string{"cannot make a CURVE key pair: "} + zmq_strerror(errno));
  return {pub, sec};
}

bool valid_curve_key(const std::string& z85) {
  uint8_t raw[32];
  return z85.size() == 40 && zmq_z85_decode(raw, z85.c_str()) != nullptr;
}

std::string curve_public_of(const std::string& secret) {
  if (!valid_curve_key(secret))
    return {};
  char pub[41] = {};
  return zmq_curve_public(pub, secret.c_str()) == 0 ? std::string{pub} : std::string{};
}

curve_keypair read_key_file(const std::string& file, const std::string& path) {
  auto bad = [&](const std::string& why) -> config_error {
    return config_error(path, "key file \"" + file + "\": " + why);
  };
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw bad(std::string{"cannot read it: "} + std::strerror(errno));
  } catch (const YAML::Exception& e) {
    throw bad(std::string{"not YAML: "} + e.what());
  }
  curve_keypair k;
  for (auto [key, out] :
       {std::pair{"public_key", &k.public_key}, std::pair{"secret_key", &k.secret_key}}) {
    auto n = doc.IsMap() ? doc[key] : YAML::Node{};
    if (!n || !n.IsScalar() || !valid_curve_key(n.Scalar()))
      throw bad(std::string{key} +
                " is missing or not a Z85 CURVE key (write one with prfaas-node keygen)");
    *out = n.Scalar();
  }
  if (curve_public_of(k.secret_key) != k.public_key)
    throw bad("its secret_key does not belong to its public_key");
  return k;
}

void write_key_file(const std::string& file, const curve_keypair& keys,
                    const std::string& comment) {
  // O_EXCL: never overwrite a key (that would lock its node out of the deployment).
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot create " + file + ": " + std::strerror(errno));
  std::string text =
      "# " + comment + "\n" +
      "# CURVE key pair (Z85). Keep it secret: whoever holds it can join the deployment.\n" +
      "public_key: \"" + keys.public_key + "\"\n" + "secret_key: \"" + keys.secret_key + "\"\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok)
    throw std::runtime_error("cannot write " + file + ": " + std::strerror(errno));
}

security_ptr make_node_security(const deployment_config& dep, const std::string& node,
                                std::shared_ptr<metrics> m, logger_ptr log) {
  if (!dep.security.enabled())
    return nullptr;
  const auto& keys = dep.security.nodes.at(node); // the parser saw to every node
  auto sec = std::make_shared<node_security>();
  sec->node = node;
  sec->keys.public_key = keys.public_key;
  if (!keys.secret_key.empty()) {
    sec->keys.secret_key = keys.secret_key;
  } else if (!keys.secret_key_file.empty()) {
    auto path = keys.path + ".secret_key_file";
    curve_keypair k;
    try {
      k = read_key_file(keys.secret_key_file, path);
    } catch (const config_error& e) {
      throw config_error(dep.source, e.path(), e.reason());
    }
    if (k.public_key != keys.public_key)
      throw config_error(dep.source, path,
                         "the key file holds public key " + k.public_key + ", not the listed " +
                             keys.public_key);
    sec->keys.secret_key = k.secret_key;
  } else {
    throw config_error(dep.source, keys.path,
                       "node " + node +
                           " runs here but has neither secret_key nor secret_key_file");
  }
  for (const auto& [name, k] : dep.security.nodes) {
    sec->peer_keys[name] = k.public_key;
    sec->allowed[k.public_key] = name;
  }
  for (size_t i = 0; i < dep.security.allow.size(); ++i)
    sec->allowed[dep.security.allow[i]] = "security.allow[" + std::to_string(i) + "]";
  const char* help = "Connections refused by CURVE authentication (ZAP), by plane";
  auto* control = &m->counter("prfaas_auth_refused_total", help, {{"plane", "control"}});
  auto* data = &m->counter("prfaas_auth_refused_total", help, {{"plane", "data"}});
  sec->on_refused = [m, log, control, data](const auth_refusal& r) {
    log->warn("auth_refused plane={} address={} key={} reason={}", r.plane, r.address,
              r.key.empty() ? "none" : r.key, r.reason);
    (r.plane == "data" ? data : control)->Increment();
  };
  return sec;
}

zap_ptr curve_server(zmq::context_t& ctx, zmq::socket_t& s, const security_ptr& sec,
                     const std::string& plane) {
  auto domain = sec->node + "/" + plane;
  auto handler = detail::zap_handler::of(ctx);
  auto token = handler->add(domain, sec, plane);
  auto reg = std::make_shared<zap_registration>(std::move(handler), domain, token);
  s.set(zmq::sockopt::curve_server, 1);
  s.set(zmq::sockopt::curve_secretkey, sec->keys.secret_key);
  s.set(zmq::sockopt::zap_domain, domain);
  int one = 1;
  if (zmq_setsockopt(s.handle(), ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) != 0)
    throw std::runtime_error(std::string{"cannot enforce ZAP on a CURVE server: "} +
                             zmq_strerror(errno));
  return reg;
}

void curve_client(zmq::socket_t& s, const node_security& sec, const std::string& peer) {
  auto i = sec.peer_keys.find(peer);
  if (i == sec.peer_keys.end())
    throw std::invalid_argument("no CURVE public key for peer " + peer);
  s.set(zmq::sockopt::curve_serverkey, i->second);
  s.set(zmq::sockopt::curve_publickey, sec.keys.public_key);
  s.set(zmq::sockopt::curve_secretkey, sec.keys.secret_key);
}

handshake_monitor::handshake_monitor(zmq::context_t& ctx, zmq::socket_t& server, security_ptr sec,
                                     std::string plane)
    : server_(server), pair_(ctx, zmq::socket_type::pair), sec_(std::move(sec)),
      plane_(std::move(plane)) {
  static std::atomic<uint64_t> next{0};
  endpoint_ = "inproc://prfaas-handshake-" + std::to_string(next++);
  // AUTH failures are ZAP's refusals, reported by the handler already.
  if (zmq_socket_monitor(server_.handle(), endpoint_.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
    throw std::runtime_error(std::string{"cannot monitor the "} + plane_ +
                             " socket: " + zmq_strerror(zmq_errno()));
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(endpoint_);
}

handshake_monitor::~handshake_monitor() {
  zmq_socket_monitor(server_.handle(), nullptr, 0);
}

zmq::pollitem_t handshake_monitor::poll_item() {
  return {pair_.handle(), 0, ZMQ_POLLIN, 0};
}

void handshake_monitor::drain() {
  for (;;) {
    zmq::message_t event, address;
    if (!pair_.recv(event, zmq::recv_flags::dontwait))
      return;
    if (!event.more() || !pair_.recv(address, zmq::recv_flags::dontwait))
      return;
    if (event.size() < 6)
      continue;
    uint16_t id = 0;
    uint32_t value = 0;
    std::memcpy(&id, event.data(), 2);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
    auth_refusal r;
    r.plane = plane_;
    r.address = address.to_string(); // the server's endpoint: libzmq names no peer here
    r.reason = id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                       value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                   ? "handshake_failed_mechanism_mismatch"
                   : "handshake_failed";
    if (sec_ && sec_->on_refused)
      sec_->on_refused(r);
  }
}

} // namespace prfaas

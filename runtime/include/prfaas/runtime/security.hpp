#pragma once

// Node-to-node security: ZeroMQ's CURVE mechanism (CurveZMQ, RFC 26) on every
// control- and data-plane socket, and ZAP (RFC 27) to decide who may connect.
//
// Each node has a key pair. A node's server sockets (the ROUTERs it binds) use its
// secret key; its client sockets (the DEALERs to peers) use its own key pair and the
// peer's public key, so a client also knows it reached the right server. A ZAP
// handler in each ZeroMQ context admits a client only if its public key is one the
// deployment lists (`security.nodes` and `security.allow`); every refusal is logged
// with the key and the peer's address and counted. ZMQ_ZAP_ENFORCE_DOMAIN makes a
// missing handler a refusal rather than an open door.
//
// Security is off when the deployment has no `security:` section: sockets then use
// the NULL mechanism, as before. A peer without CURVE cannot talk to a secured node
// at all (the handshake fails on the mechanism, before any message).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <zmq.hpp>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

/// A CURVE key pair, both halves Z85-encoded (40 characters each).
struct curve_keypair {
  std::string public_key;
  std::string secret_key;
};

/// A new random key pair (libsodium's generator, through zmq_curve_keypair). Throws
/// std::runtime_error when libzmq was built without CURVE.
curve_keypair generate_curve_keypair();
/// True when `z85` is a Z85-encoded 32-byte key.
bool valid_curve_key(const std::string& z85);
/// The public key that belongs to `secret` (Z85); empty when `secret` is not a key.
std::string curve_public_of(const std::string& secret);
/// True when this libzmq speaks CURVE (zmq_has("curve")).
bool curve_available();

/// A connection the ZAP handler refused.
struct auth_refusal {
  std::string plane;   ///< "control" or "data"
  std::string address; ///< the peer's IP address
  std::string key;     ///< its public key (Z85), empty when it offered none
  std::string reason;  ///< unknown_key, mechanism
};

/// What one node's sockets need to speak CURVE. Shared, immutable once built.
struct node_security {
  std::string node;
  curve_keypair keys;                           ///< this node's
  std::map<std::string, std::string> peer_keys; ///< node name → public key (this node too)
  std::map<std::string, std::string> allowed;   ///< public key → who (node name or "allow[i]")
  /// Called from the ZAP handler's thread for every refused connection.
  std::function<void(const auth_refusal&)> on_refused;
};

using security_ptr = std::shared_ptr<const node_security>;

/// The security of node `node` of `dep`, or null when the deployment has none. Reads
/// the node's secret key (inline, or from its key file). Refusals are logged on `log`
/// (`auth_refused plane= address= key= reason=`) and counted in `m` as
/// `prfaas_auth_refused_total{plane}`. Throws config_error naming the key when the
/// secret cannot be read or does not match the listed public key.
security_ptr make_node_security(const deployment_config& dep, const std::string& node,
                                std::shared_ptr<metrics> m, logger_ptr log);

/// Reads a key file written by `prfaas-node keygen` (YAML: public_key, secret_key).
/// Throws config_error with `path` (the config key that names the file) on failure.
curve_keypair read_key_file(const std::string& file, const std::string& path);
/// Writes `keys` to `file` readable by its owner only; throws std::runtime_error.
void write_key_file(const std::string& file, const curve_keypair& keys, const std::string& comment);

/// Keeps a ZAP handler answering for one server socket's domain. Create it before the
/// socket binds; destroy it after the socket is closed and before the context ends.
class zap_registration;
using zap_ptr = std::shared_ptr<zap_registration>;

/// Makes `s` a CURVE server of `sec` for `plane` ("control" or "data") and registers its
/// ZAP domain with the context's handler (started on first use). Call before bind.
zap_ptr curve_server(zmq::context_t& ctx, zmq::socket_t& s, const security_ptr& sec,
                     const std::string& plane);
/// Makes `s` a CURVE client of `sec` towards `peer` (a node of the deployment). Call
/// before connect. Throws std::invalid_argument for a peer without a key.
void curve_client(zmq::socket_t& s, const node_security& sec, const std::string& peer);

/// Watches a CURVE server socket for handshakes that fail before ZAP is asked — a
/// peer without CURVE (mechanism mismatch) or one speaking garbage — and reports each
/// as a refusal (`sec.on_refused`, reason `handshake_failed`): logged and counted like
/// ZAP's. Owned and polled by the thread that owns the socket (ZeroMQ's socket
/// monitor, an inproc PAIR).
class handshake_monitor {
public:
  handshake_monitor(zmq::context_t& ctx, zmq::socket_t& server, security_ptr sec,
                    std::string plane);
  ~handshake_monitor();
  handshake_monitor(const handshake_monitor&) = delete;
  handshake_monitor& operator=(const handshake_monitor&) = delete;

  /// For zmq::poll next to the server socket.
  zmq::pollitem_t poll_item();
  /// Reports every failed handshake waiting; never blocks.
  void drain();

private:
  zmq::socket_t& server_;
  zmq::socket_t pair_;
  security_ptr sec_;
  std::string plane_;
  std::string endpoint_;
};

} // namespace prfaas

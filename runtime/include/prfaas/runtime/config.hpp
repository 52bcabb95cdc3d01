#pragma once

// The deployment file: one YAML document describes every node of a deployment.
// Loading validates everything up front; a bad file is a `config_error` naming the
// key path (e.g. `nodes[1].actors[0].type`) and the prfaas-node exits with code 2.
// configs/sample.yaml documents every key and its default.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "prfaas/runtime/faults.hpp"

namespace prfaas {

using duration = std::chrono::nanoseconds;

/// A rejected configuration. `path()` is the key path, `what()` the full message
/// `"<file>: <path>: <reason>"` (segments that are empty are left out).
class config_error : public std::runtime_error {
public:
  /// Without a source: `what()` is `"<path>: <reason>"`.
  config_error(std::string path, const std::string& reason);
  /// `source` is the file name, or `<string>` for text that came from no file.
  config_error(std::string source, std::string path, const std::string& reason);
  const std::string& path() const noexcept { return path_; }
  const std::string& source() const noexcept { return source_; }
  const std::string& reason() const noexcept { return reason_; }

private:
  std::string source_;
  std::string path_;
  std::string reason_;
};

/// OTP-style restart bound: more than `intensity` restarts within `period`
/// escalates to the node (which logs why and exits non-zero).
struct supervision_config {
  uint32_t intensity = 5;
  duration period = std::chrono::seconds(10);
  duration backoff = std::chrono::milliseconds(0); ///< delay before each restart

  bool operator==(const supervision_config&) const = default;
};

/// Heartbeat-based failure detection. A peer is suspect after `suspect_misses`
/// missed intervals and down after `misses`; detection bound = interval * misses.
struct failure_detector_config {
  duration interval = std::chrono::milliseconds(200);
  uint32_t misses = 5;
  uint32_t suspect_misses = 2;

  bool operator==(const failure_detector_config&) const = default;
};

enum class overflow_policy { drop_newest, drop_oldest };

/// Control-plane transport knobs (ZeroMQ or the simulated network alike).
struct transport_config {
  duration request_timeout = std::chrono::seconds(2); ///< default when a caller gives none
  duration retry_interval = std::chrono::milliseconds(250);
  /// Re-sends back off: the n-th waits retry_interval × 2^n, at most this long (a
  /// request waiting minutes in a queue is not re-sent four times a second).
  duration max_retry_interval = std::chrono::seconds(2);
  uint32_t outbound_queue = 65536; ///< messages per peer
  overflow_policy overflow = overflow_policy::drop_newest;
  uint64_t max_envelope_bytes = 4u << 20;           ///< protobuf header frame
  uint64_t max_bulk_bytes = 256u << 20;             ///< zero-copy bulk frame
  duration dedup_window = std::chrono::seconds(30); ///< how long request ids are remembered
  uint32_t dedup_capacity = 100000;                 ///< entries kept at most
  /// ZMTP pings: off by default. libzmq 4.3.4 (Debian 12's) aborts the process when the
  /// ping timer fires on a connection whose last write failed ("Assertion failed:
  /// !_io_error (stream_engine_base.cpp:331)", zeromq/libzmq#4364, still open) — seen
  /// here after a 3 s link outage. Liveness is our failure detector's job; dead TCP
  /// connections are closed by TCP keepalive (zmq_keepalive_*) instead.
  duration zmq_heartbeat_interval = duration::zero();
  duration zmq_heartbeat_timeout = std::chrono::milliseconds(3000);
  /// TCP keepalive on every socket: probes after this much silence, every
  /// `keepalive_interval`, the connection dropped after `keepalive_count` unanswered.
  duration zmq_keepalive_idle = std::chrono::seconds(10);
  duration zmq_keepalive_interval = std::chrono::seconds(2);
  uint32_t zmq_keepalive_count = 5;
  duration linger = std::chrono::milliseconds(100);
  uint32_t send_hwm = 100000;
  uint32_t receive_hwm = 100000;
  /// A frame for an idle local actor, with no other frame waiting behind it, runs that
  /// actor for one message on the wire's own thread instead of waking a CAF worker
  /// (two thread hand-offs fewer per round trip; see messenger.hpp). Handlers must not
  /// block — as on CAF's workers — or they hold up the node's inbound frames.
  bool inline_delivery = true;

  bool operator==(const transport_config&) const = default;
};

/// Seeded fault points on the KV data path; all off by default. Probabilities per
/// chunk transmission (0..1).
struct data_fault_config {
  uint64_t seed = 0;    ///< 0 = faults off regardless of the probabilities
  double corrupt = 0.0; ///< flip a byte of the chunk on the wire
  double drop = 0.0;    ///< do not send the chunk (it times out and is re-sent)
  double delay = 0.0;   ///< hold the chunk back for `delay_for`
  duration delay_for = std::chrono::milliseconds(50);
  /// Drop every chunk of transfers to these peers: a transfer that cannot complete.
  /// In the deployment file an entry is "dst" (from every node) or "src->dst".
  std::vector<std::string> blackhole_peers;

  bool operator==(const data_fault_config&) const = default;
};

/// KV data-plane knobs shared by every node of a deployment (`data_plane:`).
/// The data plane's credit and timeouts: the deployment file's `data_plane:` keys of
/// the same names, handed to the data plane as they are (data_plane_config is one).
struct data_plane_limits {
  uint32_t window_chunks = 64;                             ///< unacked chunks per transfer
  uint64_t window_bytes = 256ull << 20;                    ///< unacked bytes per peer
  duration chunk_timeout = std::chrono::milliseconds(500); ///< re-send an unacked chunk
  duration transfer_timeout = std::chrono::seconds(
      30); ///< fail a transfer this long after its producer's last step (open, chunk, finish)
  duration receive_timeout = std::chrono::seconds(60); ///< forget a partial inbound one
  uint64_t max_chunk_bytes = 256ull << 20;             ///< larger inbound chunks are rejected

  bool operator==(const data_plane_limits&) const = default;
};

struct data_plane_settings : data_plane_limits {
  uint32_t connections = 1; ///< connections to a peer in the same cluster
  /// Reused buffers for KV bytes (buffer_pool.hpp): received chunks land in the
  /// receive pool (its size bounds what the receiver grants senders), producers fill
  /// the send pool. 0 buffers = no pool.
  uint64_t pool_buffer_bytes = 4ull << 20;
  uint32_t pool_receive_buffers = 16;
  uint32_t pool_send_buffers = 16;
  bool pool_prefault = false;  ///< touch the pools' pages at start-up
  bool pool_huge_pages = true; ///< ask for transparent huge pages
  /// The data plane's threads run this many nice steps below the node's other threads
  /// (0-19; 0 = the same priority).
  uint32_t nice = 10;
  /// Chunk payloads on plain TCP connections of their own ("tcp", read straight into
  /// receive pool buffers) or on ZeroMQ ("zmq"). With `security`, always ZeroMQ.
  bool bulk_tcp = true;
  /// The queueing delay the bulk connections' pacing keeps under (0, the default: off).
  duration queue_delay_target{0};
  data_fault_config faults;

  bool operator==(const data_plane_settings&) const = default;
};

/// A cross-cluster link (`links:`): how the data plane reaches the other side.
struct link_config {
  std::string a, b;         ///< the two clusters
  uint64_t rate_bps = 0;    ///< pacing over the link; 0 = unpaced
  uint32_t connections = 1; ///< parallel connections per peer across the link
};

/// One node's CURVE keys as the deployment file gives them (`security.nodes.<name>`).
/// Only the node itself needs its secret, so the secret is read when the node starts.
struct curve_key_config {
  std::string public_key;      ///< Z85, 40 characters
  std::string secret_key;      ///< Z85 inline (tests), or empty
  std::string secret_key_file; ///< a `prfaas-node keygen` file (absolute), or empty
  std::string path;            ///< key path, for error messages
};

/// `security:` — node-to-node authentication and encryption (ZeroMQ CURVE). Off when
/// the section is absent: sockets then use ZeroMQ's NULL mechanism.
struct security_config {
  std::map<std::string, curve_key_config> nodes; ///< every node of the deployment
  std::vector<std::string> allow;                ///< more public keys allowed to connect (tools)

  bool enabled() const { return !nodes.empty(); }
};

enum class log_level { trace, debug, info, warn, error, off };

/// One actor to start on a node. `params` is the rest of the mapping, checked
/// against the registered type's parameter list.
struct actor_config {
  std::string type;
  std::string name;
  std::string restart = "permanent"; ///< permanent | transient | temporary (OTP)
  YAML::Node params;                 ///< mapping of the remaining keys
  std::string path;                  ///< key path, for error messages
};

struct node_config {
  std::string name;
  std::string cluster; ///< empty when the deployment has no clusters
  std::string control; ///< ZeroMQ endpoint of the node's ROUTER
  std::string data;    ///< ZeroMQ endpoint of the KV data plane
  std::string admin;   ///< host:port for /metrics and /health; empty = none
  std::optional<log_level> log;
  std::vector<actor_config> actors;
  std::string path;
};

struct cluster_config {
  std::string name;
  std::string kind; ///< prefill-only | pd
  /// A PD cluster's weight where PrfaaS workers it shares with other PD clusters are
  /// busy (weighted fair queueing of prefill work, on as soon as any cluster sets one);
  /// 0 = not set (first come first served; a cluster left unset weighs 1 once another
  /// sets a share).
  uint32_t share = 0;
};

/// How a PrfaaS worker weighs the PD clusters it serves (`fair_share:`).
enum class fair_share_rule {
  share,     ///< by `clusters.<name>.share` alone (fair queueing once any is set)
  link_rate, ///< that share times the part of the PD cluster's link bandwidth that leads
             ///< to this PrfaaS cluster: a cluster weighs most where it depends most
};

struct deployment_config {
  std::string name;
  std::string source;               ///< file the config was read from
  std::vector<std::string> plugins; ///< shared libraries, resolved against the file's folder
  log_level log = log_level::info;
  uint64_t seed = 1; ///< root of every seeded generator
  supervision_config supervision;
  failure_detector_config failure_detector;
  transport_config transport;
  std::map<std::string, cluster_config> clusters;
  fair_share_rule fair_share = fair_share_rule::share;
  YAML::Node model;                   ///< engine/model settings, read by the workers
  YAML::Node links;                   ///< cross-cluster links as written (monitors read extra keys)
  std::vector<link_config> link_list; ///< the same links, typed
  data_plane_settings data_plane;
  security_config security;
  fault_config faults; ///< named fault points (faults.hpp); off by default
  std::vector<node_config> nodes;

  const node_config* find_node(const std::string& name) const;
  /// The link between two clusters, if declared (either order).
  const link_config* find_link(const std::string& a, const std::string& b) const;
  /// PrfaaS workers queue PD clusters' prefills by weighted fair queueing: some cluster
  /// sets a share, or the rule is link_rate.
  bool fair_queueing() const;
  /// The weight of PD cluster `pd` at the workers of PrfaaS cluster `prfaas` under fair
  /// queueing: its share (1 where unset), under link_rate times the rate of its link to
  /// `prfaas` over the rates of all its links to PrfaaS clusters (1 where it has no link
  /// there). Positive.
  double fair_weight(const std::string& prfaas, const std::string& pd) const;
};

/// Reads, parses and validates a deployment file. An unreadable file is a `config_error`
/// with an empty path. Actor types and their parameters are not checked here: the actor
/// registry does that once plugins are loaded (using `actor_config::path` in its errors).
deployment_config load_deployment(const std::string& file);
/// Parses and validates `yaml_text`. `source` names it in errors; unless it is of the form
/// `<...>` (e.g. `<string>`) it is taken as the file's name, and relative plugin paths are
/// resolved against that file's folder (made absolute).
deployment_config parse_deployment(const std::string& yaml_text, const std::string& source);

/// "200ms", "1.5s", "2m", "1h", "500us", "100ns". Throws std::invalid_argument.
duration parse_duration(const std::string& text);
/// "64MiB", "1GiB", "512KiB", "4096", "1MB". Bytes. Throws std::invalid_argument.
uint64_t parse_bytes(const std::string& text);
/// "1gbit", "100mbit", "10kbit", "1000bit", "1.5gbit", also "125MBps" (bytes/s). Bits per second.
uint64_t parse_rate(const std::string& text);
std::string to_string(log_level);
std::string format_duration(duration);
/// The largest binary unit that represents `bytes` exactly ("1GiB", "64MiB", "100"), so
/// parse_bytes(format_bytes(b)) == b.
std::string format_bytes(uint64_t bytes);
/// The largest bit unit that represents `bits_per_s` exactly ("1gbit", "100mbit"), so
/// parse_rate(format_rate(r)) == r.
std::string format_rate(uint64_t bits_per_s);

} // namespace prfaas

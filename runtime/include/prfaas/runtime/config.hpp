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
  uint32_t outbound_queue = 65536;                     ///< messages per peer
  overflow_policy overflow = overflow_policy::drop_newest;
  uint64_t max_envelope_bytes = 4u << 20;              ///< protobuf header frame
  uint64_t max_bulk_bytes = 256u << 20;                ///< zero-copy bulk frame
  duration dedup_window = std::chrono::seconds(30);    ///< how long request ids are remembered
  uint32_t dedup_capacity = 100000;                    ///< entries kept at most
  duration zmq_heartbeat_interval = std::chrono::milliseconds(1000); ///< ZMTP ping
  duration zmq_heartbeat_timeout = std::chrono::milliseconds(3000);
  duration linger = std::chrono::milliseconds(100);
  uint32_t send_hwm = 100000;
  uint32_t receive_hwm = 100000;

  bool operator==(const transport_config&) const = default;
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
  std::string cluster;         ///< empty when the deployment has no clusters
  std::string control;         ///< ZeroMQ endpoint of the node's ROUTER
  std::string data;            ///< ZeroMQ endpoint of the KV data plane
  std::string admin;           ///< host:port for /metrics and /health; empty = none
  std::optional<log_level> log;
  std::vector<actor_config> actors;
  std::string path;
};

struct cluster_config {
  std::string name;
  std::string kind; ///< prefill-only | pd
};

struct deployment_config {
  std::string name;
  std::string source;                 ///< file the config was read from
  std::vector<std::string> plugins;   ///< shared libraries, resolved against the file's folder
  log_level log = log_level::info;
  uint64_t seed = 1;                  ///< root of every seeded generator
  supervision_config supervision;
  failure_detector_config failure_detector;
  transport_config transport;
  std::map<std::string, cluster_config> clusters;
  YAML::Node model;                   ///< engine/model settings, read by the workers
  YAML::Node links;                   ///< cross-cluster links, read by the link monitors
  std::vector<node_config> nodes;

  const node_config* find_node(const std::string& name) const;
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

} // namespace prfaas

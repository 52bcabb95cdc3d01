#include "prfaas/runtime/config.hpp"
#include "config_parser.hpp"
#include "prfaas/runtime/security.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <string_view>

namespace prfaas {

using detail::decimal;
using detail::is_digit;
using detail::scaled;

// -- config_error ------------------------------------------------------------------------------

namespace {

std::string join_message(const std::string& source, const std::string& path,
                         const std::string& reason) {
  std::string out;
  for (const std::string* part : {&source, &path}) {
    if (!part->empty()) {
      out += *part;
      out += ": ";
    }
  }
  return out + reason;
}

} // namespace

config_error::config_error(std::string path, const std::string& reason)
    : config_error(std::string{}, std::move(path), reason) {}

config_error::config_error(std::string source, std::string path, const std::string& reason)
    : std::runtime_error(join_message(source, path, reason)), source_(std::move(source)),
      path_(std::move(path)), reason_(reason) {}

const node_config* deployment_config::find_node(const std::string& name) const {
  for (const auto& node : nodes)
    if (node.name == name)
      return &node;
  return nullptr;
}

// -- the deployment file ------------------------------------------------------------------------

namespace config_detail {

deployment_config deployment_parser::parse(const std::string& text) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    fail("", "YAML syntax error at line " + std::to_string(e.mark.line + 1) + ", column " +
                 std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    fail("", std::string{"cannot parse YAML: "} + e.what());
  }
  if (docs.empty() || docs.front().IsNull())
    fail("", "the document is empty (expected a mapping with deployment and nodes)");
  if (docs.size() > 1)
    fail("", "expected one YAML document, found " + std::to_string(docs.size()));
  const YAML::Node root = docs.front();
  if (!root.IsMap())
    fail("", "expected a mapping at the top level, got " + describe(root));
  check_keys(root, "",
             {"deployment", "plugins", "log_level", "seed", "supervision", "failure_detector",
              "transport", "data_plane", "clusters", "fair_share", "model", "links", "nodes",
              "security", "faults"});

  deployment_config cfg;
  cfg.source = source_;
  cfg.name = name(required(root, "deployment", ""), "deployment");
  if (auto n = root["plugins"]; present(n))
    parse_plugins(n, cfg);
  if (auto n = root["log_level"])
    cfg.log = level(n, "log_level");
  if (auto n = root["seed"])
    cfg.seed = unsigned_int(n, "seed", 0, std::numeric_limits<uint64_t>::max());
  if (auto n = root["supervision"])
    parse_supervision(n, cfg.supervision);
  if (auto n = root["failure_detector"])
    parse_failure_detector(n, cfg.failure_detector);
  if (auto n = root["transport"])
    parse_transport(n, cfg.transport);
  if (auto n = root["data_plane"])
    parse_data_plane(n, cfg.data_plane);
  if (auto n = root["clusters"]; present(n))
    parse_clusters(n, cfg);
  if (auto n = root["model"]; present(n)) {
    expect_map(n, "model");
    cfg.model = YAML::Clone(n);
  }
  if (auto n = root["links"]; present(n))
    parse_links(n, cfg);
  if (auto n = root["fair_share"])
    parse_fair_share(n, cfg);
  parse_nodes(required(root, "nodes", ""), cfg);
  if (auto n = root["security"])
    parse_security(n, cfg);
  if (auto n = root["faults"])
    parse_faults(n, cfg.faults);
  return cfg;
}

void deployment_parser::parse_plugins(const YAML::Node& node, deployment_config& cfg) const {
  if (!node.IsSequence())
    fail("plugins", "expected a sequence of paths, got " + describe(node));
  for (size_t i = 0; i < node.size(); ++i) {
    fs::path plugin = nonempty_string(node[i], index("plugins", i));
    if (plugin.is_relative() && base_)
      plugin = (*base_ / plugin).lexically_normal();
    cfg.plugins.push_back(plugin.string());
  }
}

void deployment_parser::parse_supervision(const YAML::Node& node, supervision_config& out) const {
  const std::string path = "supervision";
  expect_map(node, path);
  check_keys(node, path, {"intensity", "period", "backoff"});
  if (auto n = node["intensity"])
    out.intensity = uint32(n, join(path, "intensity"));
  if (auto n = node["period"])
    out.period = time(n, join(path, "period"), true);
  if (auto n = node["backoff"])
    out.backoff = time(n, join(path, "backoff"));
}

void deployment_parser::parse_failure_detector(const YAML::Node& node,
                                               failure_detector_config& out) const {
  const std::string path = "failure_detector";
  expect_map(node, path);
  check_keys(node, path, {"interval", "misses", "suspect_misses"});
  if (auto n = node["interval"])
    out.interval = time(n, join(path, "interval"), true);
  if (auto n = node["misses"])
    out.misses = uint32(n, join(path, "misses"), 2);
  if (auto n = node["suspect_misses"])
    out.suspect_misses = uint32(n, join(path, "suspect_misses"), 1);
  if (out.suspect_misses >= out.misses) {
    // Blame the key the user wrote; with both defaults this cannot happen.
    if (node["suspect_misses"])
      fail(join(path, "suspect_misses"),
           "must be less than misses (" + std::to_string(out.misses) + ")");
    fail(join(path, "misses"),
         "must be greater than suspect_misses (" + std::to_string(out.suspect_misses) + ")");
  }
}

void deployment_parser::parse_data_plane(const YAML::Node& node, data_plane_settings& out) const {
  const std::string path = "data_plane";
  expect_map(node, path);
  check_keys(node, path,
             {"window_chunks", "window_bytes", "chunk_timeout", "transfer_timeout",
              "receive_timeout", "max_chunk_bytes", "connections", "pool_buffer_bytes",
              "pool_receive_buffers", "pool_send_buffers", "pool_prefault", "pool_huge_pages",
              "chunk_transport", "queue_delay_target", "nice", "faults"});
  auto key = [&](const char* k) { return join(path, k); };
  if (auto n = node["window_chunks"])
    out.window_chunks = uint32(n, key("window_chunks"), 1);
  if (auto n = node["window_bytes"])
    out.window_bytes = size(n, key("window_bytes"));
  if (auto n = node["chunk_timeout"])
    out.chunk_timeout = time(n, key("chunk_timeout"), true);
  if (auto n = node["transfer_timeout"])
    out.transfer_timeout = time(n, key("transfer_timeout"), true);
  if (auto n = node["receive_timeout"])
    out.receive_timeout = time(n, key("receive_timeout"), true);
  if (auto n = node["max_chunk_bytes"])
    out.max_chunk_bytes = size(n, key("max_chunk_bytes"));
  if (auto n = node["connections"])
    out.connections = uint32(n, key("connections"), 1);
  if (auto n = node["pool_buffer_bytes"])
    out.pool_buffer_bytes = size(n, key("pool_buffer_bytes"));
  if (auto n = node["pool_receive_buffers"])
    out.pool_receive_buffers = uint32(n, key("pool_receive_buffers"));
  if (auto n = node["pool_send_buffers"])
    out.pool_send_buffers = uint32(n, key("pool_send_buffers"));
  if (auto n = node["pool_prefault"])
    out.pool_prefault = boolean(n, key("pool_prefault"));
  if (auto n = node["pool_huge_pages"])
    out.pool_huge_pages = boolean(n, key("pool_huge_pages"));
  if (auto n = node["nice"])
    out.nice = static_cast<uint32_t>(unsigned_int(n, key("nice"), 0, 19));
  if (auto n = node["chunk_transport"])
    out.bulk_tcp = choice(n, key("chunk_transport"), {"tcp", "zmq"}) == "tcp";
  if (auto n = node["queue_delay_target"])
    out.queue_delay_target = time(n, key("queue_delay_target"));
  if (out.chunk_timeout >= out.transfer_timeout)
    fail(key(node["chunk_timeout"] ? "chunk_timeout" : "transfer_timeout"),
         "chunk_timeout (" + format_duration(out.chunk_timeout) +
             ") must be less than transfer_timeout (" + format_duration(out.transfer_timeout) +
             ")");
  if (auto f = node["faults"]) {
    const std::string fpath = key("faults");
    expect_map(f, fpath);
    check_keys(f, fpath, {"seed", "corrupt", "drop", "delay", "delay_for", "blackhole_peers"});
    auto& out_f = out.faults;
    if (auto n = f["seed"])
      out_f.seed = unsigned_int(n, join(fpath, "seed"), 0, std::numeric_limits<uint64_t>::max());
    if (auto n = f["corrupt"])
      out_f.corrupt = probability(n, join(fpath, "corrupt"));
    if (auto n = f["drop"])
      out_f.drop = probability(n, join(fpath, "drop"));
    if (auto n = f["delay"])
      out_f.delay = probability(n, join(fpath, "delay"));
    if (auto n = f["delay_for"])
      out_f.delay_for = time(n, join(fpath, "delay_for"));
    if (auto n = f["blackhole_peers"]; present(n)) {
      if (!n.IsSequence())
        fail(join(fpath, "blackhole_peers"),
             "expected a sequence of node names, got " + describe(n));
      for (size_t i = 0; i < n.size(); ++i)
        out_f.blackhole_peers.push_back(
            nonempty_string(n[i], index(join(fpath, "blackhole_peers"), i)));
    }
  }
}

void deployment_parser::parse_faults(const YAML::Node& node, fault_config& out) const {
  const std::string path = "faults";
  expect_map(node, path);
  check_keys(node, path, {"seed", "points"});
  if (auto n = node["seed"])
    out.seed = unsigned_int(n, join(path, "seed"), 0, std::numeric_limits<uint64_t>::max());
  if (auto points = node["points"]; present(points)) {
    const std::string ppath = join(path, "points");
    expect_map(points, ppath);
    check_keys(points, ppath, {}, true);
    for (const auto& kv : points) {
      const std::string& name = kv.first.Scalar();
      if (!is_fault_point(name)) {
        std::string known;
        for (auto& p : fault_inventory())
          known += (known.empty() ? "" : ", ") + std::string{p.name};
        fail(join(ppath, name), "unknown fault point (expected one of: " + known + ")");
      }
      out.points[name] = probability(kv.second, join(ppath, name));
    }
  }
}

void deployment_parser::parse_transport(const YAML::Node& node, transport_config& out) const {
  const std::string path = "transport";
  expect_map(node, path);
  check_keys(node, path,
             {"request_timeout", "retry_interval", "max_retry_interval", "outbound_queue",
              "overflow", "max_envelope_bytes", "max_bulk_bytes", "dedup_window", "dedup_capacity",
              "zmq_heartbeat_interval", "zmq_heartbeat_timeout", "zmq_keepalive_idle",
              "zmq_keepalive_interval", "zmq_keepalive_count", "linger", "send_hwm", "receive_hwm",
              "inline_delivery"});
  auto key = [&](const char* k) { return join(path, k); };
  if (auto n = node["request_timeout"])
    out.request_timeout = time(n, key("request_timeout"), true);
  if (auto n = node["retry_interval"])
    out.retry_interval = time(n, key("retry_interval"), true);
  if (out.retry_interval >= out.request_timeout) {
    if (node["retry_interval"])
      fail(key("retry_interval"),
           "must be less than request_timeout (" + format_duration(out.request_timeout) + ")");
    fail(key("request_timeout"),
         "must be greater than retry_interval (" + format_duration(out.retry_interval) + ")");
  }
  if (auto n = node["max_retry_interval"]) {
    out.max_retry_interval = time(n, key("max_retry_interval"), true);
    if (out.max_retry_interval < out.retry_interval)
      fail(key("max_retry_interval"),
           "must not be less than retry_interval (" + format_duration(out.retry_interval) + ")");
  } else {
    out.max_retry_interval = std::max(out.max_retry_interval, out.retry_interval);
  }
  if (auto n = node["outbound_queue"])
    out.outbound_queue = uint32(n, key("outbound_queue"), 1);
  if (auto n = node["overflow"])
    out.overflow = choice(n, key("overflow"), {"drop_newest", "drop_oldest"}) == "drop_oldest"
                       ? overflow_policy::drop_oldest
                       : overflow_policy::drop_newest;
  using T = transport_config;
  for (auto [k, field] : {std::pair{"max_envelope_bytes", &T::max_envelope_bytes},
                          {"max_bulk_bytes", &T::max_bulk_bytes}})
    if (auto n = node[k])
      out.*field = size(n, key(k));
  for (auto [k, field] : {std::pair{"dedup_window", &T::dedup_window},
                          {"zmq_heartbeat_interval", &T::zmq_heartbeat_interval},
                          {"zmq_heartbeat_timeout", &T::zmq_heartbeat_timeout},
                          {"zmq_keepalive_idle", &T::zmq_keepalive_idle},
                          {"zmq_keepalive_interval", &T::zmq_keepalive_interval},
                          {"linger", &T::linger}})
    if (auto n = node[k])
      out.*field = time(n, key(k));
  for (auto [k, field] : {std::pair{"dedup_capacity", &T::dedup_capacity},
                          {"zmq_keepalive_count", &T::zmq_keepalive_count},
                          {"send_hwm", &T::send_hwm},
                          {"receive_hwm", &T::receive_hwm}})
    if (auto n = node[k])
      out.*field = uint32(n, key(k));
  if (auto n = node["inline_delivery"])
    out.inline_delivery = boolean(n, key("inline_delivery"));
}

void deployment_parser::parse_nodes(const YAML::Node& node, deployment_config& cfg) {
  if (!node.IsSequence())
    fail("nodes", "expected a sequence of nodes, got " + describe(node));
  if (node.size() == 0)
    fail("nodes", "must list at least one node");
  for (size_t i = 0; i < node.size(); ++i) {
    auto parsed = parse_node(node[i], index("nodes", i), cfg);
    cfg.nodes.push_back(std::move(parsed));
  }
}

node_config deployment_parser::parse_node(const YAML::Node& node, const std::string& path,
                                          const deployment_config& cfg) {
  expect_map(node, path);
  check_keys(node, path, {"name", "cluster", "control", "data", "admin", "log_level", "actors"});
  node_config out;
  out.path = path;
  out.name = name(required(node, "name", path), join(path, "name"));
  for (const auto& other : cfg.nodes)
    if (other.name == out.name)
      fail(join(path, "name"),
           "duplicate node name " + quote(out.name) + " (also " + other.path + ")");

  const std::string cluster_path = join(path, "cluster");
  if (auto n = node["cluster"]) {
    out.cluster = nonempty_string(n, cluster_path);
    if (cfg.clusters.empty())
      fail(cluster_path, "unknown cluster " + quote(out.cluster) + " (no clusters are declared)");
    if (cfg.clusters.count(out.cluster) == 0)
      fail(cluster_path, "unknown cluster " + quote(out.cluster));
  } else if (!cfg.clusters.empty()) {
    fail(cluster_path, "missing required key (the deployment declares clusters)");
  }

  for (const char* key : {"control", "data"}) {
    const std::string key_path = join(path, key);
    auto text = nonempty_string(required(node, key, path), key_path);
    claim(endpoint(text, key_path));
    (std::string_view{key} == "control" ? out.control : out.data) = text;
  }
  if (auto n = node["admin"]) {
    out.admin = nonempty_string(n, join(path, "admin"));
    claim(admin_endpoint(out.admin, join(path, "admin")));
  }
  if (auto n = node["log_level"])
    out.log = level(n, join(path, "log_level"));

  if (auto n = node["actors"]; present(n)) {
    const std::string actors_path = join(path, "actors");
    if (!n.IsSequence())
      fail(actors_path, "expected a sequence of actors, got " + describe(n));
    for (size_t i = 0; i < n.size(); ++i) {
      auto actor = parse_actor(n[i], index(actors_path, i));
      for (const auto& other : out.actors)
        if (other.name == actor.name)
          fail(join(actor.path, "name"),
               "duplicate actor name " + quote(actor.name) + " (also " + other.path + ")");
      out.actors.push_back(std::move(actor));
    }
  }
  return out;
}

actor_config deployment_parser::parse_actor(const YAML::Node& node, const std::string& path) const {
  expect_map(node, path);
  check_keys(node, path, {}, true);
  actor_config out;
  out.path = path;
  out.type = nonempty_string(required(node, "type", path), join(path, "type"));
  out.name = name(required(node, "name", path), join(path, "name"));
  if (auto n = node["restart"])
    out.restart = choice(n, join(path, "restart"), {"permanent", "transient", "temporary"});
  out.params = YAML::Node(YAML::NodeType::Map);
  for (const auto& kv : node) {
    const auto& key = kv.first.Scalar();
    if (key != "type" && key != "name" && key != "restart")
      out.params[key] = YAML::Clone(kv.second);
  }
  return out;
}

endpoint_use deployment_parser::endpoint(const std::string& text, const std::string& path) const {
  auto invalid = [&](const std::string& why) { bad_endpoint(path, text, why); };
  endpoint_use use;
  use.path = path;
  use.text = text;
  auto sep = text.find("://");
  if (sep == std::string::npos)
    invalid("expected tcp://host:port, ipc://path or inproc://name");
  use.scheme = text.substr(0, sep);
  std::string rest = text.substr(sep + 3);
  if (use.scheme == "ipc" || use.scheme == "inproc") {
    if (rest.empty())
      invalid("the " + use.scheme + " address is empty");
    use.name = rest;
    return use;
  }
  if (use.scheme != "tcp")
    invalid("unsupported transport " + quote(use.scheme) + "; expected tcp, ipc or inproc");
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    invalid("expected tcp://host:port");
  std::string port = rest.substr(colon + 1);
  if (port == "*" || port == "0")
    invalid("the port must be concrete: peers connect to it");
  bool digits = true;
  for (char c : port)
    digits = digits && is_digit(c);
  if (!digits || port.size() > 5 || std::stoul(port) > 65535)
    invalid("port " + quote(port) + " is not a number from 1 to 65535");
  use.host = normalize_host(rest.substr(0, colon));
  use.port = static_cast<uint32_t>(std::stoul(port));
  return use;
}

endpoint_use deployment_parser::admin_endpoint(const std::string& text,
                                               const std::string& path) const {
  endpoint_use use;
  use.path = path;
  use.text = text;
  use.scheme = "tcp";
  auto colon = text.rfind(':');
  std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port)
    digits = digits && is_digit(c);
  if (colon == 0 || !digits || std::stoul(port) > 65535 || text.find("://") != std::string::npos)
    fail(path, "invalid address " + quote(text) +
                   " (expected host:port with a port from 0 to 65535, e.g. 127.0.0.1:9100)");
  use.host = normalize_host(text.substr(0, colon));
  use.port = static_cast<uint32_t>(std::stoul(port));
  return use;
}

void deployment_parser::claim(endpoint_use use) {
  for (const auto& other : endpoints_) {
    if (!clash(use, other))
      continue;
    if (use.text == other.text)
      fail(use.path,
           "endpoint " + quote(use.text) + " clashes with " + other.path + " (the same endpoint)");
    fail(use.path, "endpoint " + quote(use.text) + " clashes with " + other.path + " (" +
                       quote(other.text) + ")");
  }
  endpoints_.push_back(std::move(use));
}

} // namespace config_detail

using config_detail::deployment_parser;
namespace fs = std::filesystem;

deployment_config parse_deployment(const std::string& yaml_text, const std::string& source) {
  std::optional<fs::path> base;
  if (!source.empty() && source.front() != '<') {
    std::error_code ec;
    auto absolute = fs::absolute(fs::path{source}, ec);
    if (!ec)
      base = absolute.parent_path();
  }
  return deployment_parser{source, std::move(base)}.parse(yaml_text);
}

deployment_config load_deployment(const std::string& file) {
  std::string text;
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr)
    throw config_error(file, "", std::string{"cannot open the file: "} + std::strerror(errno));
  char buf[8192];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  int read_error = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (read_error != 0)
    throw config_error(file, "", std::string{"cannot read the file: "} + std::strerror(read_error));
  return parse_deployment(text, file);
}

} // namespace prfaas

#pragma once

// The deployment-file parser, shared by the translation units that read its sections
// (config.cpp: the document and most sections; config_security.cpp: `security:`).
// Private to the runtime.

#include "prfaas/runtime/config.hpp"
#include "config_units.hpp"

#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace prfaas::config_detail {

using detail::decimal;
using detail::is_digit;
using detail::scaled;

namespace fs = std::filesystem;

const char* const node_name_rule = "[A-Za-z0-9_.-]+";

inline bool valid_name(const std::string& name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

inline std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + '"';
}

inline std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
  case YAML::NodeType::Null:
    return "null";
  case YAML::NodeType::Scalar:
    return quote(node.Scalar());
  case YAML::NodeType::Sequence:
    return "a sequence";
  case YAML::NodeType::Map:
    return "a mapping";
  case YAML::NodeType::Undefined:
    break;
  }
  return "nothing";
}

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

inline std::string index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

inline std::string one_of(std::initializer_list<std::string_view> names) {
  std::string out;
  for (auto name : names) {
    if (!out.empty())
      out += ", ";
    out += name;
  }
  return out;
}

/// A control, data or admin endpoint, reduced to what decides whether two of them clash.
struct endpoint_use {
  std::string path;   ///< e.g. nodes[1].control
  std::string text;   ///< as written
  std::string scheme; ///< tcp, ipc, inproc (admin endpoints count as tcp)
  std::string host;   ///< tcp: lower-case, localhost as 127.0.0.1, wildcards as "*"
  uint32_t port = 0;  ///< tcp; 0 (admin only) is ephemeral and clashes with nothing
  std::string name;   ///< ipc path or inproc name
};

inline std::string normalize_host(std::string host) {
  for (auto& c : host)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host == "localhost")
    return "127.0.0.1";
  if (host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]")
    return "*";
  return host;
}

inline bool clash(const endpoint_use& a, const endpoint_use& b) {
  if (a.scheme != b.scheme)
    return false;
  if (a.scheme != "tcp")
    return a.name == b.name;
  if (a.port == 0 || a.port != b.port)
    return false;
  return a.host == b.host || a.host == "*" || b.host == "*";
}

/// Reads the whole deployment document into a `deployment_config`, failing on the first
/// problem with the key path that holds it.
class deployment_parser {
public:
  deployment_parser(std::string source, std::optional<fs::path> base)
      : source_(std::move(source)), base_(std::move(base)) {}

  deployment_config parse(const std::string& text);

private:
  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw config_error(source_, path, reason);
  }

  [[noreturn]] void bad_endpoint(const std::string& path, const std::string& text,
                                 const std::string& why) const {
    fail(path, "invalid endpoint " + quote(text) + " (" + why + ")");
  }

  // -- shapes and scalars --

  void expect_map(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap())
      fail(path, "expected a mapping, got " + describe(node));
  }

  /// Fails on duplicate keys and, unless `open`, on keys outside `known`.
  void check_keys(const YAML::Node& map, const std::string& path,
                  std::initializer_list<std::string_view> known, bool open = false) const {
    std::vector<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar())
        fail(path, "keys must be strings, got " + describe(kv.first));
      const std::string& key = kv.first.Scalar();
      for (const auto& s : seen)
        if (s == key)
          fail(join(path, key), "duplicate key");
      seen.push_back(key);
      if (open)
        continue;
      bool ok = false;
      for (auto k : known)
        ok = ok || k == key;
      if (!ok)
        fail(join(path, key), "unknown key (expected one of: " + one_of(known) + ")");
    }
  }

  YAML::Node required(const YAML::Node& map, const std::string& key,
                      const std::string& path) const {
    YAML::Node node = map[key];
    if (!node)
      fail(join(path, key), "missing required key");
    return node;
  }

  std::string string(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar())
      fail(path, "expected a string, got " + describe(node));
    return node.Scalar();
  }

  std::string nonempty_string(const YAML::Node& node, const std::string& path) const {
    auto s = string(node, path);
    if (s.empty())
      fail(path, "must not be empty");
    return s;
  }

  std::string name(const YAML::Node& node, const std::string& path) const {
    auto s = nonempty_string(node, path);
    if (!valid_name(s))
      fail(path, "invalid name " + quote(s) + " (allowed characters: " + node_name_rule + ")");
    return s;
  }

  uint64_t unsigned_int(const YAML::Node& node, const std::string& path, uint64_t min,
                        uint64_t max) const {
    if (!node.IsScalar())
      fail(path, "expected a non-negative integer, got " + describe(node));
    const auto& text = node.Scalar();
    decimal whole{text, {}, {}};
    bool digits = !text.empty();
    for (char c : text)
      digits = digits && is_digit(c);
    auto value = digits ? scaled(whole, 1, max) : std::nullopt;
    if (!digits)
      fail(path, "expected a non-negative integer, got " + describe(node));
    if (!value)
      fail(path, "must be at most " + std::to_string(max) + ", got " + text);
    if (*value < min)
      fail(path, "must be at least " + std::to_string(min) + ", got " + text);
    return *value;
  }

  /// `true` or `false`.
  bool boolean(const YAML::Node& node, const std::string& path) const {
    return choice(node, path, {"true", "false"}) == "true";
  }

  uint32_t uint32(const YAML::Node& node, const std::string& path, uint32_t min = 0) const {
    return static_cast<uint32_t>(
        unsigned_int(node, path, min, std::numeric_limits<uint32_t>::max()));
  }

  duration time(const YAML::Node& node, const std::string& path, bool positive = false) const {
    auto text = string(node, path);
    duration d;
    try {
      d = parse_duration(text);
    } catch (const std::invalid_argument& e) {
      fail(path, e.what());
    }
    if (positive && d <= duration::zero())
      fail(path, "must be greater than zero");
    return d;
  }

  uint64_t size(const YAML::Node& node, const std::string& path) const {
    auto text = string(node, path);
    uint64_t n = 0;
    try {
      n = parse_bytes(text);
    } catch (const std::invalid_argument& e) {
      fail(path, e.what());
    }
    if (n == 0)
      fail(path, "must be greater than zero");
    return n;
  }

  uint64_t rate(const YAML::Node& node, const std::string& path) const {
    auto text = string(node, path);
    try {
      return parse_rate(text);
    } catch (const std::invalid_argument& e) {
      fail(path, e.what());
    }
  }

  double probability(const YAML::Node& node, const std::string& path) const {
    auto text = string(node, path);
    char* end = nullptr;
    double p = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(p >= 0.0 && p <= 1.0))
      fail(path, "expected a probability between 0 and 1, got " + quote(text));
    return p;
  }

  log_level level(const YAML::Node& node, const std::string& path) const {
    auto text = string(node, path);
    for (auto l : {log_level::trace, log_level::debug, log_level::info, log_level::warn,
                   log_level::error, log_level::off})
      if (to_string(l) == text)
        return l;
    fail(path, "invalid value " + quote(text) +
                   " (expected one of: trace, debug, info, warn, error, off)");
  }

  std::string choice(const YAML::Node& node, const std::string& path,
                     std::initializer_list<std::string_view> allowed) const {
    auto text = string(node, path);
    for (auto a : allowed)
      if (a == text)
        return text;
    fail(path, "invalid value " + quote(text) + " (expected one of: " + one_of(allowed) + ")");
  }

  /// An optional collection: absent or null means empty.
  static bool present(const YAML::Node& node) { return node && !node.IsNull(); }

  // -- sections --

  void parse_plugins(const YAML::Node& node, deployment_config& cfg) const;
  void parse_supervision(const YAML::Node& node, supervision_config& out) const;
  void parse_failure_detector(const YAML::Node& node, failure_detector_config& out) const;
  void parse_transport(const YAML::Node& node, transport_config& out) const;
  void parse_data_plane(const YAML::Node& node, data_plane_settings& out) const;
  void parse_faults(const YAML::Node& node, fault_config& out) const;
  void parse_clusters(const YAML::Node& node, deployment_config& cfg) const;
  void parse_links(const YAML::Node& node, deployment_config& cfg) const;
  void parse_fair_share(const YAML::Node& node, deployment_config& cfg) const;
  void parse_nodes(const YAML::Node& node, deployment_config& cfg);
  void parse_security(const YAML::Node& node, deployment_config& cfg) const;
  std::string curve_key(const YAML::Node& node, const std::string& path) const;
  node_config parse_node(const YAML::Node& node, const std::string& path,
                         const deployment_config& cfg);
  actor_config parse_actor(const YAML::Node& node, const std::string& path) const;
  endpoint_use endpoint(const std::string& text, const std::string& path) const;
  endpoint_use admin_endpoint(const std::string& text, const std::string& path) const;
  void claim(endpoint_use use);

  std::string source_;
  std::optional<fs::path> base_;        ///< folder relative plugin paths are resolved in
  std::vector<endpoint_use> endpoints_; ///< every endpoint seen so far, in document order
};

} // namespace prfaas::config_detail

// The deployment file's `security:` section: every node's CURVE keys and the extra
// keys allowed in (see configs/sample.yaml). Part of the deployment parser.

#include "config_parser.hpp"
#include "prfaas/runtime/security.hpp"

namespace prfaas::config_detail {

std::string deployment_parser::curve_key(const YAML::Node& node, const std::string& path) const {
  auto key = string(node, path);
  if (!valid_curve_key(key))
    fail(path, "expected a Z85-encoded CURVE key of 40 characters (prfaas-node keygen makes "
               "one), got " +
                   std::to_string(key.size()) + " characters");
  return key;
}

void deployment_parser::parse_security(const YAML::Node& node, deployment_config& cfg) const {
  const std::string path = "security";
  expect_map(node, path);
  check_keys(node, path, {"nodes", "allow"});
  if (!curve_available())
    fail(path, "this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  const std::string nodes_path = join(path, "nodes");
  const YAML::Node nodes = required(node, "nodes", path);
  expect_map(nodes, nodes_path);
  check_keys(nodes, nodes_path, {}, true);
  std::map<std::string, std::string> owner; // public key → key path, to catch reuse
  auto claim_key = [&](const std::string& key, const std::string& where) {
    if (auto [it, fresh] = owner.emplace(key, where); !fresh)
      fail(where, "the same public key is also given at " + it->second);
  };
  for (const auto& kv : nodes) {
    const std::string name = kv.first.Scalar();
    const std::string npath = join(nodes_path, name);
    if (!cfg.find_node(name))
      fail(npath, "unknown node " + quote(name) + " (not in nodes:)");
    expect_map(kv.second, npath);
    check_keys(kv.second, npath, {"public_key", "secret_key", "secret_key_file"});
    curve_key_config k;
    k.path = npath;
    k.public_key = curve_key(required(kv.second, "public_key", npath), join(npath, "public_key"));
    claim_key(k.public_key, join(npath, "public_key"));
    auto inline_secret = kv.second["secret_key"];
    auto file = kv.second["secret_key_file"];
    if (inline_secret && file)
      fail(join(npath, "secret_key"), "give secret_key or secret_key_file, not both");
    if (inline_secret) {
      k.secret_key = curve_key(inline_secret, join(npath, "secret_key"));
      if (curve_public_of(k.secret_key) != k.public_key)
        fail(join(npath, "secret_key"), "does not belong to public_key (its public key is " +
                                            curve_public_of(k.secret_key) + ")");
    }
    if (file) {
      fs::path f = nonempty_string(file, join(npath, "secret_key_file"));
      if (f.is_relative() && base_)
        f = (*base_ / f).lexically_normal();
      k.secret_key_file = f.string();
    }
    cfg.security.nodes.emplace(name, std::move(k));
  }
  for (const auto& n : cfg.nodes)
    if (cfg.security.nodes.count(n.name) == 0)
      fail(join(nodes_path, n.name),
           "missing: with security on, every node needs its public_key (and, to run, its secret)");
  if (auto allow = node["allow"]; present(allow)) {
    const std::string apath = join(path, "allow");
    if (!allow.IsSequence())
      fail(apath, "expected a sequence of public keys, got " + describe(allow));
    for (size_t i = 0; i < allow.size(); ++i) {
      auto key = curve_key(allow[i], index(apath, i));
      claim_key(key, index(apath, i));
      cfg.security.allow.push_back(key);
    }
  }
}

} // namespace prfaas::config_detail

// The clusters of a deployment, the links between them and how PrfaaS workers weigh the
// PD clusters they serve (`clusters:`, `links:`, `fair_share:`).

#include "config_parser.hpp"
#include "prfaas/runtime/config.hpp"

#include <algorithm>

namespace prfaas {

const link_config* deployment_config::find_link(const std::string& a, const std::string& b) const {
  for (const auto& l : link_list)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a))
      return &l;
  return nullptr;
}

bool deployment_config::fair_queueing() const {
  return fair_share == fair_share_rule::link_rate ||
         std::any_of(clusters.begin(), clusters.end(), [](auto& c) { return c.second.share > 0; });
}

double deployment_config::fair_weight(const std::string& prfaas, const std::string& pd) const {
  auto it = clusters.find(pd);
  const double share = it == clusters.end() || it->second.share == 0 ? 1.0 : it->second.share;
  if (fair_share != fair_share_rule::link_rate)
    return share;
  auto kind = [&](const std::string& c) {
    auto k = clusters.find(c);
    return k == clusters.end() ? std::string{} : k->second.kind;
  };
  double to_it = 0, all = 0;
  for (const auto& l : link_list) {
    if (l.a != pd && l.b != pd)
      continue;
    const std::string& other = l.a == pd ? l.b : l.a;
    if (kind(other) != "prefill-only")
      continue;
    all += static_cast<double>(l.rate_bps);
    if (other == prfaas)
      to_it = static_cast<double>(l.rate_bps);
  }
  return to_it > 0 && all > 0 ? share * to_it / all : share;
}

} // namespace prfaas

namespace prfaas::config_detail {

void deployment_parser::parse_clusters(const YAML::Node& node, deployment_config& cfg) const {
  expect_map(node, "clusters");
  check_keys(node, "clusters", {}, true);
  for (const auto& kv : node) {
    const std::string path = join("clusters", kv.first.Scalar());
    cluster_config cluster;
    cluster.name = name(kv.first, path);
    expect_map(kv.second, path);
    check_keys(kv.second, path, {"kind", "share"});
    cluster.kind =
        choice(required(kv.second, "kind", path), join(path, "kind"), {"prefill-only", "pd"});
    if (auto share = kv.second["share"]) {
      if (cluster.kind != "pd")
        fail(join(path, "share"), "a share weighs a PD cluster's prefill work on the PrfaaS "
                                  "clusters it shares; a prefill-only cluster has none");
      cluster.share = uint32(share, join(path, "share"), 1);
    }
    cfg.clusters.emplace(cluster.name, std::move(cluster));
  }
}

void deployment_parser::parse_fair_share(const YAML::Node& node, deployment_config& cfg) const {
  if (choice(node, "fair_share", {"share", "link_rate"}) == "share")
    return;
  cfg.fair_share = fair_share_rule::link_rate;
  // The rule weighs a PD cluster by its links' rates: each link it has to a PrfaaS
  // cluster needs one.
  auto kind = [&](const std::string& c) { return cfg.clusters.at(c).kind; };
  for (size_t i = 0; i < cfg.link_list.size(); ++i) {
    const auto& l = cfg.link_list[i];
    if (kind(l.a) != kind(l.b) && l.rate_bps == 0)
      fail(index("links", i),
           "fair_share: link_rate weighs each PD cluster by the rates of its links to PrfaaS "
           "clusters; this link between " +
               quote(l.a) + " and " + quote(l.b) + " needs a rate");
  }
}

void deployment_parser::parse_links(const YAML::Node& node, deployment_config& cfg) const {
  if (!node.IsSequence())
    fail("links", "expected a sequence, got " + describe(node));
  std::vector<std::pair<std::pair<std::string, std::string>, std::string>> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string path = index("links", i);
    const YAML::Node link = node[i];
    expect_map(link, path);
    check_keys(link, path, {}, true); // only duplicates: the other keys are the monitors'
    const std::string between_path = join(path, "between");
    const YAML::Node between = required(link, "between", path);
    if (!between.IsSequence() || between.size() != 2)
      fail(between_path,
           "expected two cluster names, e.g. [prfaas, pd], got " +
               (between.IsSequence() ? "a sequence of " + std::to_string(between.size()) + " items"
                                     : describe(between)));
    std::string ends[2];
    for (size_t j = 0; j < 2; ++j) {
      ends[j] = nonempty_string(between[j], index(between_path, j));
      if (cfg.clusters.count(ends[j]) == 0)
        fail(index(between_path, j),
             "unknown cluster " + quote(ends[j]) +
                 (cfg.clusters.empty() ? " (no clusters are declared)" : ""));
    }
    if (ends[0] == ends[1])
      fail(between_path, "a link needs two distinct clusters, got " + quote(ends[0]) + " twice");
    auto key = ends[0] < ends[1] ? std::pair{ends[0], ends[1]} : std::pair{ends[1], ends[0]};
    for (const auto& [other, other_path] : seen)
      if (other == key)
        fail(between_path, "duplicate link between " + quote(ends[0]) + " and " + quote(ends[1]) +
                               " (also " + other_path + ")");
    seen.emplace_back(key, path);
    link_config typed{.a = ends[0], .b = ends[1]};
    if (auto n = link["rate"])
      typed.rate_bps = rate(n, join(path, "rate"));
    if (auto n = link["connections"])
      typed.connections = uint32(n, join(path, "connections"), 1);
    if (typed.connections > 64)
      fail(join(path, "connections"),
           "at most 64 connections per peer, got " + std::to_string(typed.connections));
    cfg.link_list.push_back(std::move(typed));
  }
  cfg.links = YAML::Clone(node);
}

} // namespace prfaas::config_detail

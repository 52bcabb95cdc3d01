#include "netns_plan.hpp"

#include <filesystem>
#include <map>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace prfaas::chaos {

namespace {

using argv = std::vector<std::string>;

/// "tcp://127.0.0.1:7300" -> "tcp://IP:7300"; "127.0.0.1:9300" -> "IP:9300".
std::string rehost(const std::string& endpoint, const std::string& ip) {
  auto scheme = endpoint.find("://");
  auto host_at = scheme == std::string::npos ? 0 : scheme + 3;
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < host_at)
    return endpoint; // no port: left as written (the config parser names it)
  return endpoint.substr(0, host_at) + ip + endpoint.substr(colon);
}

std::string cluster_of(const node_config& n) {
  if (n.cluster.empty())
    throw std::runtime_error(n.path + ": node " + n.name +
                             " has no cluster; the netns topology places nodes by cluster");
  return n.cluster;
}

/// The switch namespace of cluster `c`: routes, and (`track`) tracks connections.
void add_switch(netns_plan& p, const planned_cluster& c, bool track) {
  p.setup.push_back({"ip", "netns", "add", c.ns});
  p.setup.push_back({"ip", "-n", c.ns, "link", "set", "lo", "up"});
  p.setup.push_back(in_netns(c.ns, {"sysctl", "-qw", "net.ipv4.ip_forward=1"}));
  if (!track)
    return;
  p.setup.push_back(in_netns(c.ns, {"nft", "add", "table", "inet", "prfaas_track"}));
  p.setup.push_back(in_netns(c.ns, {"nft", "add chain inet prfaas_track forward { type filter "
                                           "hook forward priority -20 ; policy accept ; }"}));
  p.setup.push_back(in_netns(c.ns, {"nft", "add", "rule", "inet", "prfaas_track", "forward", "ct",
                                    "state", "new", "counter"}));
}

} // namespace

std::vector<std::string> in_netns(const std::string& ns, std::vector<std::string> argv) {
  if (ns.empty())
    return argv;
  std::vector<std::string> out{"nsenter", "--net=/var/run/netns/" + ns, "--"};
  out.insert(out.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return out;
}

const planned_node& netns_plan::node(const std::string& name) const {
  for (auto& n : nodes)
    if (n.name == name)
      return n;
  throw std::out_of_range("no node " + name + " in the netns plan");
}

const planned_cluster& netns_plan::cluster(const std::string& name) const {
  for (auto& c : clusters)
    if (c.name == name)
      return c;
  throw std::out_of_range("no cluster " + name + " in the netns plan");
}

const planned_link* netns_plan::link_between(const std::string& a, const std::string& b) const {
  for (auto& l : links)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a))
      return &l;
  return nullptr;
}

netns_plan plan_netns(const deployment_config& d, const std::string& tag, bool track) {
  netns_plan p;
  std::map<std::string, size_t> index; // cluster -> its index (subnet 10.77.<i+1>.0/24)
  std::map<std::string, int> members;
  for (auto& n : d.nodes) {
    auto c = cluster_of(n);
    if (!index.count(c)) {
      index[c] = p.clusters.size();
      auto third = std::to_string(p.clusters.size() + 1);
      p.clusters.push_back({c, "prfaas-" + tag + "-sw-" + c, "10.77." + third + ".0/24"});
    }
  }
  if (p.clusters.size() > 250 || d.link_list.size() > 250)
    throw std::runtime_error(d.source +
                             ": the netns topology places at most 250 clusters and links");

  for (auto& c : p.clusters)
    add_switch(p, c, track);
  for (size_t i = 0; i < d.nodes.size(); ++i) {
    auto& n = d.nodes[i];
    auto c = cluster_of(n);
    auto& cl = p.clusters[index[c]];
    int host = ++members[c];
    if (host > 250)
      throw std::runtime_error(d.source + ": cluster " + c + " has more than 250 nodes");
    auto net = "10.77." + std::to_string(index[c] + 1) + ".";
    planned_node pn{n.name,
                    c,
                    "prfaas-" + tag + "-" + n.name,
                    net + std::to_string(host),
                    cl.ns,
                    "n" + std::to_string(i)};
    auto gw = net + "254";
    p.setup.push_back({"ip", "netns", "add", pn.ns});
    p.setup.push_back({"ip", "-n", pn.ns, "link", "set", "lo", "up"});
    p.setup.push_back({"ip", "link", "add", "eth0", "netns", pn.ns, "type", "veth", "peer", "name",
                       pn.port, "netns", cl.ns});
    p.setup.push_back({"ip", "-n", pn.ns, "addr", "add", pn.ip + "/32", "dev", "eth0"});
    p.setup.push_back({"ip", "-n", pn.ns, "link", "set", "eth0", "up"});
    p.setup.push_back({"ip", "-n", cl.ns, "addr", "add", gw + "/32", "dev", pn.port});
    p.setup.push_back({"ip", "-n", cl.ns, "link", "set", pn.port, "up"});
    p.setup.push_back({"ip", "-n", cl.ns, "route", "add", pn.ip + "/32", "dev", pn.port});
    p.setup.push_back({"ip", "-n", pn.ns, "route", "add", gw + "/32", "dev", "eth0"});
    p.setup.push_back({"ip", "-n", pn.ns, "route", "add", "default", "via", gw, "dev", "eth0"});
    p.nodes.push_back(pn);
  }
  for (size_t j = 0; j < d.link_list.size(); ++j) {
    auto& l = d.link_list[j];
    if (!index.count(l.a) || !index.count(l.b))
      continue; // a link to a cluster without nodes carries nothing
    auto& a = p.clusters[index[l.a]];
    auto& b = p.clusters[index[l.b]];
    // Unpaced links (rate 0) still get a bucket, far above anything this machine moves.
    auto rate = std::to_string(l.rate_bps ? l.rate_bps : 100'000'000'000ull) + "bit";
    planned_link pl{l.a, l.b, a.ns, b.ns, "l" + std::to_string(j), rate};
    auto net = "10.78." + std::to_string(j + 1) + ".";
    p.setup.push_back({"ip", "link", "add", pl.dev, "netns", a.ns, "type", "veth", "peer", "name",
                       pl.dev, "netns", b.ns});
    for (auto [ns, self, other, far] :
         {std::tuple{a.ns, "1", "2", b.subnet}, std::tuple{b.ns, "2", "1", a.subnet}}) {
      p.setup.push_back({"ip", "-n", ns, "addr", "add", net + self + "/24", "dev", pl.dev});
      p.setup.push_back({"ip", "-n", ns, "link", "set", pl.dev, "up"});
      pl.routes.push_back({"ip", "-n", ns, "route", "replace", far, "via", net + other});
      p.setup.push_back(pl.routes.back());
      // A token bucket on each end (each direction), like a leased line.
      p.setup.push_back(in_netns(ns, {"tc", "qdisc", "add", "dev", pl.dev, "root", "tbf", "rate",
                                      rate, "burst", "256kb", "latency", "50ms"}));
    }
    p.links.push_back(pl);
  }
  for (auto& n : p.nodes)
    p.namespaces.push_back(n.ns);
  for (auto& c : p.clusters)
    p.namespaces.push_back(c.ns);
  return p;
}

std::string place_deployment(const std::string& yaml_text, const std::string& source,
                             const netns_plan& plan) {
  auto root = YAML::Load(yaml_text);
  for (auto n : root["nodes"]) {
    auto ip = plan.node(n["name"].as<std::string>()).ip;
    for (auto key : {"control", "data", "admin"})
      if (n[key])
        n[key] = rehost(n[key].as<std::string>(), ip);
    for (auto a : n["actors"])
      if (a["listen"])
        a["listen"] = rehost(a["listen"].as<std::string>(), ip);
  }
  if (auto plugins = root["plugins"]) {
    auto folder = std::filesystem::absolute(std::filesystem::path{source}).parent_path();
    for (size_t i = 0; i < plugins.size(); ++i) {
      std::filesystem::path f{plugins[i].as<std::string>()};
      if (f.is_relative())
        plugins[i] = (folder / f).string();
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string{out.c_str()} + "\n";
}

} // namespace prfaas::chaos

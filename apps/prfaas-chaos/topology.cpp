#include "topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "probe.hpp"

namespace prfaas::chaos {

namespace {

using namespace std::chrono_literals;
namespace t = prfaas::proc;

/// "tcp://10.77.0.2:7301" or "10.77.0.2:9301" -> (host, port).
std::pair<std::string, int> host_port(const std::string& endpoint, const std::string& what) {
  auto s = endpoint;
  if (auto p = s.find("://"); p != std::string::npos)
    s = s.substr(p + 3);
  auto colon = s.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error(what + ": no port in \"" + endpoint + "\"");
  return {s.substr(0, colon), std::stoi(s.substr(colon + 1))};
}

std::string param(const actor_config& a, const char* key) {
  auto v = a.params[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

} // namespace

topology::topology(const scenario& s, const environment& env) : env_(env), kind_(s.topology) {
  if (kind_ == topology_kind::netns && setup_netns(s))
    return;
  kind_ = topology_kind::loopback;
  config_file_ = env_.repo / s.deployment;
  deployment_ = load_deployment(config_file_.string());
  std::map<std::string, std::string> ns_of;
  if (setup_loopback())
    for (auto& n : deployment_.nodes)
      ns_of[n.name] = private_ns_;
  place_nodes(ns_of);
}

bool topology::setup_netns(const scenario& s) {
  auto hold = env_.work / "netns.env";
  netns_script_ = std::make_unique<t::child_process>(
      t::command{.argv = {(env_.repo / "tools/netns-two-dc.sh").string(), "--setup", hold.string(),
                          "--config", (env_.repo / s.deployment).string()},
                 .extra_env = {"PRFAAS_NODE=" + (env_.bin / "prfaas-node").string()},
                 .out_file = env_.work / "netns-setup.log"});
  t::eventually([&] { return std::filesystem::exists(hold) || !netns_script_->running(); }, 60s,
                50ms);
  if (!std::filesystem::exists(hold)) {
    auto code = netns_script_->wait(5s);
    auto out = netns_script_->output();
    netns_script_.reset();
    if (code != 77)
      throw std::runtime_error("tools/netns-two-dc.sh --setup failed:\n" + out);
    auto why = out.substr(out.find("skipped:") == std::string::npos ? 0 : out.find("skipped:"));
    while (!why.empty() && why.back() == '\n')
      why.pop_back();
    if (!s.fallback_loopback)
      throw skipped(why.rfind("skipped: ", 0) == 0 ? why.substr(9) : why);
    fallback_reason_ = why;
    return false;
  }
  auto a = t::read_assignments(hold);
  link_ = link_place{a["NS_A"], a["NS_B"], a["VETH_A"], a["VETH_B"], a["RATE"]};
  config_file_ = a["CONFIG"];
  deployment_ = load_deployment(config_file_.string());
  std::vector<std::string> in_a;
  std::istringstream names{a["NODES_A"]};
  for (std::string n; names >> n;)
    in_a.push_back(n);
  std::map<std::string, std::string> ns_of;
  for (auto& n : deployment_.nodes)
    ns_of[n.name] =
        std::find(in_a.begin(), in_a.end(), n.name) != in_a.end() ? link_->ns_a : link_->ns_b;
  place_nodes(ns_of);
  return true;
}

bool topology::setup_loopback() {
  auto name = "prfaas-chaos-" + std::to_string(::getpid());
  auto r = t::run({.argv = {"ip", "netns", "add", name}}, 10s);
  if (r.code != 0) {
    fallback_reason_ += (fallback_reason_.empty() ? "" : "; ") +
                        std::string{"no private namespace, nodes run in ours: "} + r.output;
    return false;
  }
  private_ns_ = name;
  t::run({.argv = {"ip", "-n", name, "link", "set", "lo", "up"}}, 10s);
  return true;
}

void topology::place_nodes(const std::map<std::string, std::string>& ns_of) {
  for (auto& n : deployment_.nodes) {
    node_place p;
    p.name = n.name;
    p.ns = ns_of.count(n.name) ? ns_of.at(n.name) : "";
    auto [host, control] = host_port(n.control, n.path + ".control");
    p.ip = host;
    p.control_port = control;
    p.data_port = host_port(n.data, n.path + ".data").second;
    if (n.admin.empty())
      throw std::runtime_error(n.path + ": node " + n.name +
                               " has no admin endpoint; prfaas-chaos watches /health");
    p.admin_port = host_port(n.admin, n.path + ".admin").second;
    places_[n.name] = p;
    names_.push_back(n.name);
  }
}

topology::~topology() {
  for (auto& [name, p] : procs_)
    if (p && p->running()) {
      p->signal(SIGCONT);
      p->signal(SIGTERM);
    }
  for (auto& [name, p] : procs_)
    if (p)
      p->wait(10s);
  procs_.clear(); // SIGKILLs what is left
  if (netns_script_) {
    netns_script_->signal(SIGTERM);
    netns_script_->wait(30s);
  }
  if (!private_ns_.empty())
    t::run({.argv = {"ip", "netns", "del", private_ns_}}, 10s);
}

bool topology::private_network() const {
  return kind_ == topology_kind::netns || !private_ns_.empty();
}

topology::gateway_place topology::gateway() const {
  for (auto& n : deployment_.nodes)
    for (auto& a : n.actors)
      if (a.type == "gateway") {
        auto listen = param(a, "listen");
        return {n.name, listen.empty() ? "127.0.0.1:8000" : listen, places_.at(n.name).ns};
      }
  throw std::runtime_error(deployment_.source + ": no node runs a gateway to send load to");
}

std::vector<std::string> topology::scheduler_nodes() const {
  std::vector<std::string> out;
  for (auto& n : deployment_.nodes)
    for (auto& a : n.actors)
      if (a.type == "scheduler") {
        out.push_back(n.name);
        break;
      }
  return out;
}

std::vector<std::string> topology::in_ns(const std::string& ns,
                                         std::vector<std::string> argv) const {
  if (ns.empty())
    return argv;
  std::vector<std::string> out{"ip", "netns", "exec", ns};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

bool topology::run_in(const std::string& ns, std::vector<std::string> argv,
                      std::string& out) const {
  auto r = t::run({.argv = in_ns(ns, std::move(argv))}, 10s);
  out = r.output;
  return r.code == 0;
}

std::filesystem::path topology::log_of(const std::string& node) const {
  return env_.work / (node + ".log");
}

void topology::start(const std::string& node) {
  // `ip netns exec` execs the node, so the child's pid is the node's own: kill -9 and
  // SIGSTOP reach it directly.
  auto argv = in_ns(place(node).ns, {(env_.bin / "prfaas-node").string(), "--config",
                                     config_file_.string(), "--node", node});
  procs_[node] =
      std::make_unique<t::child_process>(t::command{.argv = argv, .out_file = log_of(node)});
  killed_[node] = false;
}

void topology::start_all() {
  for (auto& n : names_)
    start(n);
}

bool topology::running(const std::string& node) {
  auto it = procs_.find(node);
  return it != procs_.end() && it->second && it->second->running();
}

void topology::signal(const std::string& node, int sig) {
  if (auto it = procs_.find(node); it != procs_.end() && it->second)
    it->second->signal(sig);
}

void topology::kill(const std::string& node) {
  if (auto it = procs_.find(node); it != procs_.end() && it->second) {
    it->second->signal(SIGKILL);
    it->second->wait(5s);
    killed_[node] = true;
  }
}

std::map<std::string, int> topology::unexpected_exits() {
  std::map<std::string, int> out;
  for (auto& [name, p] : procs_)
    if (p && !killed_[name] && !p->running())
      out[name] = p->wait(0ms).value_or(-1);
  return out;
}

bool topology::wait_healthy(std::chrono::milliseconds limit, std::string& why) {
  auto all_up = [&] {
    for (auto& n : names_) {
      if (!running(n)) {
        why = n + " is not running";
        return true; // stop waiting: it will not come up
      }
      auto h = get_health(place(n));
      if (!h) {
        why = n + ": /health does not answer";
        return false;
      }
      for (auto& peer : names_) {
        if (peer == n)
          continue;
        auto v = peer_in(*h, peer);
        if (!v || v->state != "up") {
          why = n + " sees " + peer + " " + (v ? v->state : "not yet");
          return false;
        }
      }
    }
    // The gateway serves only once its actor runs, a moment after the node is up.
    auto gw = gateway();
    auto colon = gw.listen.rfind(':');
    if (!http_get(gw.ns, gw.listen.substr(0, colon), std::stoi(gw.listen.substr(colon + 1)),
                  "/v1/models")) {
      why = "the gateway does not answer GET /v1/models";
      return false;
    }
    why.clear();
    return true;
  };
  return t::eventually(all_up, limit, 100ms) && why.empty();
}

} // namespace prfaas::chaos

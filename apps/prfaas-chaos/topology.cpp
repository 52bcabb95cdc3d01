#include "topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <atomic>
#include <mutex>
#include <set>
#include <fstream>
#include <sstream>
#include <thread>

#include "faults.hpp"
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

/// Namespaces made by live topologies, for emergency_teardown().
std::mutex made_mtx;
std::set<std::string> made;

void track(const std::string& ns) {
  std::lock_guard g{made_mtx};
  made.insert(ns);
}

void untrack(const std::string& ns) {
  std::lock_guard g{made_mtx};
  made.erase(ns);
}

std::string param(const actor_config& a, const char* key) {
  auto v = a.params[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

} // namespace

void emergency_teardown() {
  std::set<std::string> namespaces;
  {
    std::lock_guard g{made_mtx};
    namespaces = made;
  }
  // Through the shell: this runs on the signal-handling thread while the main thread
  // may be anywhere, so nothing here touches the run's own objects. We are listed in a
  // namespace ourselves while a probe of ours is inside it (setns), hence the grep.
  const auto self = std::to_string(::getpid());
  std::string script;
  for (auto& ns : namespaces)
    script += "ip netns pids '" + ns + "' | grep -vx " + self + " | xargs -r kill -9; ";
  for (auto& ns : namespaces)
    script += "ip netns del '" + ns + "' 2>/dev/null; ";
  if (!script.empty() && std::system(script.c_str()) != 0)
    std::cerr << "prfaas-chaos: some namespaces could not be removed" << std::endl;
  for (auto& ns : namespaces)
    untrack(ns);
}

topology::topology(const scenario& s, const environment& env) : env_(env), kind_(s.topology) {
  try {
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
  } catch (...) {
    remove_namespaces(); // no destructor runs for a constructor that throws
    throw;
  }
}

void topology::remove_namespaces() {
  // Deleting a namespace removes its veth ends (and their peers) with it; deleting one
  // that was never made fails harmlessly.
  for (auto& ns : plan_.namespaces) {
    t::run({.argv = {"ip", "netns", "del", ns}}, 10s);
    untrack(ns);
  }
  plan_.namespaces.clear();
  if (!private_ns_.empty()) {
    t::run({.argv = {"ip", "netns", "del", private_ns_}}, 10s);
    untrack(private_ns_);
  }
  private_ns_.clear();
}

bool topology::setup_netns(const scenario& s) {
  auto source = (env_.repo / s.deployment).string();
  auto original = load_deployment(source);
  plan_ = plan_netns(original, std::to_string(::getpid()), nft_installed());
  for (auto& ns : plan_.namespaces)
    track(ns);
  for (auto& cmd : plan_.setup) {
    auto r = t::run({.argv = cmd}, 10s);
    if (r.code != 0) {
      std::string line;
      for (auto& a : cmd)
        line += (line.empty() ? "" : " ") + a;
      auto why = "cannot build the netns topology: " + line + ": " + r.output;
      while (!why.empty() && why.back() == '\n')
        why.pop_back();
      if (&cmd != &plan_.setup.front())
        throw std::runtime_error(why); // namespaces work here, something else is wrong
      plan_ = {};                      // nothing was made
      if (!s.fallback_loopback)
        throw skipped(why);
      fallback_reason_ = why;
      return false;
    }
  }
  config_file_ = env_.work / "netns.yaml";
  std::ifstream in{source};
  std::ostringstream text;
  text << in.rdbuf();
  std::ofstream{config_file_} << place_deployment(text.str(), source, plan_);
  deployment_ = load_deployment(config_file_.string());
  std::map<std::string, std::string> ns_of;
  for (auto& n : plan_.nodes)
    ns_of[n.name] = n.ns;
  place_nodes(ns_of);
  return true;
}

const link_place* topology::link_for(const fault_spec& f) const {
  if (!f.link.empty()) {
    if (auto* l = plan_.link_between(f.link[0], f.link[1]))
      return l;
    throw std::runtime_error(f.path + ".link: no link between " + f.link[0] + " and " + f.link[1] +
                             " in the deployment's links:");
  }
  if (plan_.links.size() > 1)
    throw std::runtime_error(f.path + ": the deployment has " + std::to_string(plan_.links.size()) +
                             " links; name one (link: [cluster, cluster])");
  return plan_.links.empty() ? nullptr : &plan_.links.front();
}

std::string topology::switch_of(const std::string& node) const {
  for (auto& n : plan_.nodes)
    if (n.name == node)
      return n.switch_ns;
  return {};
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
  track(name);
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
  remove_namespaces();
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

namespace {

/// A command that took long: its fault came (or went) that much late.
void note_if_slow(const std::string& output, std::chrono::steady_clock::duration took) {
  if (took < 1s)
    return;
  auto line = output.substr(0, output.find('\n'));
  std::cerr << "prfaas-chaos: slow command (" << std::chrono::duration<double>(took).count()
            << " s): " << line << std::endl;
}

} // namespace

std::vector<std::string> topology::in_ns(const std::string& ns,
                                         std::vector<std::string> argv) const {
  return in_netns(ns, std::move(argv));
}

bool topology::run_in(const std::string& ns, std::vector<std::string> argv,
                      std::string& out) const {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = t::run({.argv = in_ns(ns, std::move(argv))}, command_limit);
  out = r.output;
  note_if_slow(out, std::chrono::steady_clock::now() - t0);
  return r.code == 0;
}

bool topology::query_in(const std::string& ns, std::vector<std::string> argv,
                        std::string& out) const {
  static std::atomic<uint64_t> seq{0};
  auto base = env_.work / ("query-" + std::to_string(seq++));
  auto stdout_file = base, stderr_file = base;
  stdout_file += ".out";
  stderr_file += ".err";
  bool ok = false;
  {
    t::child_process p{t::command{
        .argv = in_ns(ns, std::move(argv)), .out_file = stdout_file, .err_file = stderr_file}};
    const auto t0 = std::chrono::steady_clock::now();
    auto code = p.wait(command_limit);
    ok = code && *code == 0;
    out =
        ok ? p.out() : p.output() + (code ? "" : "\n(killed: still running after the time limit)");
    // (the child is killed and reaped with `p` if it is still running)
    note_if_slow(p.output(), std::chrono::steady_clock::now() - t0);
  }
  std::error_code ec;
  std::filesystem::remove(stdout_file, ec);
  std::filesystem::remove(stderr_file, ec);
  return ok;
}

std::filesystem::path topology::log_of(const std::string& node) const {
  return env_.work / (node + ".log");
}

void topology::start(const std::string& node) {
  // `nsenter` execs the node (no --fork), so the child's pid is the node's own: kill -9
  // and SIGSTOP reach it directly.
  // --live-faults: `fault_point` faults switch the node's fault points while it runs.
  auto argv = in_ns(place(node).ns, {(env_.bin / "prfaas-node").string(), "--config",
                                     config_file_.string(), "--node", node, "--live-faults"});
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

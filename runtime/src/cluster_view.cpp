#include "prfaas/runtime/cluster_view.hpp"

#include <algorithm>
#include <future>
#include <optional>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace prfaas {

namespace {

using json = nlohmann::json;

/// What one node's endpoint said, or why it said nothing.
struct answer {
  std::optional<json> body;
  std::string error; ///< why there is no body
};

answer fetch(const std::string& admin, const std::string& path, std::chrono::milliseconds timeout) {
  const auto colon = admin.rfind(':');
  std::string host = admin.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "*")
    host = "127.0.0.1"; // bound to every address: ask over loopback
  httplib::Client cli{host, std::stoi(admin.substr(colon + 1))};
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout - s);
  cli.set_connection_timeout(s.count(), us.count());
  cli.set_read_timeout(s.count(), us.count());
  auto res = cli.Get(path);
  if (!res)
    return {std::nullopt, "unreachable (" + httplib::to_string(res.error()) + ")"};
  if (res->status != 200)
    return {std::nullopt, "HTTP " + std::to_string(res->status)};
  try {
    return {json::parse(res->body), ""};
  } catch (const json::exception& e) {
    return {std::nullopt, "bad " + path + " body: " + e.what()};
  }
}

/// How the reachable nodes' failure detectors see `node`: "up 3/3", "down 1/3, up 2/3".
std::string seen_by(const std::map<std::string, answer>& all, const std::string& node,
                    std::map<std::string, size_t>& counts) {
  size_t observers = 0;
  for (auto& [name, h] : all) {
    if (name == node || !h.body)
      continue;
    for (auto& p : h.body->value("peers", json::array()))
      if (p.value("node", "") == node) {
        ++counts[p.value("state", "?")];
        ++observers;
      }
  }
  if (observers == 0)
    return "-";
  std::string out;
  for (auto& [state, n] : counts)
    out += (out.empty() ? "" : ", ") + state + " " + std::to_string(n) + "/" +
           std::to_string(observers);
  return out;
}

void describe_actors(const json& body, node_row& r) {
  std::string out;
  for (auto& a : body.value("actors", json::array())) {
    out += (out.empty() ? "" : " ") + a.value("name", "?");
    if (!a.value("running", false))
      out += "(stopped)";
    if (auto n = a.value("restarts", 0); n > 0)
      out += "(" + std::to_string(n) + " restarts)";
    const std::string type = a.value("type", "");
    if (!type.empty() && std::find(r.roles.begin(), r.roles.end(), type) == r.roles.end())
      r.roles.push_back(type);
  }
  r.actors = out.empty() ? "-" : out;
}

node_row row_of(const node_config& n, const std::map<std::string, answer>& all) {
  node_row r{.node = n.name, .cluster = n.cluster.empty() ? "-" : n.cluster};
  std::map<std::string, size_t> views;
  r.seen = seen_by(all, n.name, views);
  const bool others_say_up = views.size() == 1 && views.count("up");
  auto it = all.find(n.name);
  if (it == all.end()) { // no admin endpoint: only the others can say
    r.state = others_say_up ? "up" : views.empty() ? "unknown" : "not up";
    r.actors = "(no admin endpoint)";
    r.healthy = others_say_up;
    return r;
  }
  const auto& h = it->second;
  if (!h.body) {
    r.state = "down";
    r.actors = h.error;
    return r;
  }
  r.incarnation = std::to_string(h.body->value("incarnation", uint64_t{0}));
  describe_actors(*h.body, r);
  const std::string status = h.body->value("status", "?");
  if (status != "ok")
    r.state = status;
  else if (views.count("down"))
    r.state = "down?";
  else if (views.count("suspect"))
    r.state = "suspect";
  else
    r.state = "up";
  r.healthy = r.state == "up";
  return r;
}

} // namespace

size_t cluster_gathering::healthy() const {
  return static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [](const node_row& r) { return r.healthy; }));
}

cluster_gathering gather_cluster(const deployment_config& dep, std::chrono::milliseconds timeout,
                                 bool with_overviews) {
  std::map<std::string, std::future<answer>> health, overview;
  for (auto& n : dep.nodes) {
    if (n.admin.empty())
      continue;
    health[n.name] = std::async(std::launch::async, fetch, n.admin, "/health", timeout);
    if (with_overviews)
      overview[n.name] = std::async(std::launch::async, fetch, n.admin, "/overview", timeout);
  }
  std::map<std::string, answer> all;
  for (auto& [name, f] : health)
    all[name] = f.get();
  cluster_gathering g;
  for (auto& n : dep.nodes)
    g.rows.push_back(row_of(n, all));
  for (auto& [name, f] : overview)
    if (auto a = f.get(); a.body)
      g.overviews[name] = a.body->dump();
  return g;
}

} // namespace prfaas

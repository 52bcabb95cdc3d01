#include "status.hpp"

#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace prfaas::app {

namespace {

using json = nlohmann::json;

/// What one node's /health said, or why it said nothing.
struct health {
  std::optional<json> body;
  std::string error; ///< why there is no body
};

health fetch(const std::string& admin, std::chrono::milliseconds timeout) {
  const auto colon = admin.rfind(':');
  std::string host = admin.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "*")
    host = "127.0.0.1"; // bound to every address: ask over loopback
  httplib::Client cli{host, std::stoi(admin.substr(colon + 1))};
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout - s);
  cli.set_connection_timeout(s.count(), us.count());
  cli.set_read_timeout(s.count(), us.count());
  auto res = cli.Get("/health");
  if (!res)
    return {std::nullopt, "unreachable (" + httplib::to_string(res.error()) + ")"};
  if (res->status != 200)
    return {std::nullopt, "HTTP " + std::to_string(res->status)};
  try {
    return {json::parse(res->body), ""};
  } catch (const json::exception& e) {
    return {std::nullopt, std::string("bad /health body: ") + e.what()};
  }
}

/// One row of the table.
struct row {
  std::string node, cluster, state, incarnation = "-", seen, actors;
  bool healthy = false;
};

/// How the reachable nodes' failure detectors see `node`: "up 3/3", "down 1/3, up 2/3".
std::string seen_by(const std::map<std::string, health>& all, const std::string& node,
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

std::string actors_of(const json& body) {
  std::string out;
  for (auto& a : body.value("actors", json::array())) {
    out += (out.empty() ? "" : " ") + a.value("name", "?");
    if (!a.value("running", false))
      out += "(stopped)";
    if (auto r = a.value("restarts", 0); r > 0)
      out += "(" + std::to_string(r) + " restarts)";
  }
  return out.empty() ? "-" : out;
}

row row_of(const node_config& n, const std::map<std::string, health>& all) {
  row r{.node = n.name, .cluster = n.cluster.empty() ? "-" : n.cluster};
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
  r.actors = actors_of(*h.body);
  const std::string status = h.body->value("status", "?");
  if (status != "ok")
    r.state = status; // e.g. escalated: its supervisor gave up on an actor
  else if (views.count("down"))
    r.state = "down?"; // answers, but a peer declared it down (partitioned, or fenced)
  else if (views.count("suspect"))
    r.state = "suspect";
  else
    r.state = "up";
  r.healthy = r.state == "up";
  return r;
}

} // namespace

int run_status(const deployment_config& dep, std::ostream& out, std::chrono::milliseconds timeout) {
  std::map<std::string, health> all;
  for (auto& n : dep.nodes)
    if (!n.admin.empty())
      all[n.name] = fetch(n.admin, timeout);
  std::vector<row> rows;
  for (auto& n : dep.nodes)
    rows.push_back(row_of(n, all));

  const std::vector<std::string> heads{"NODE", "CLUSTER", "STATE", "INCARNATION", "SEEN BY PEERS"};
  std::vector<size_t> width(heads.size());
  auto cells = [](const row& r) {
    return std::vector<std::string>{r.node, r.cluster, r.state, r.incarnation, r.seen};
  };
  for (size_t i = 0; i < heads.size(); ++i)
    width[i] = heads[i].size();
  for (auto& r : rows) {
    auto c = cells(r);
    for (size_t i = 0; i < c.size(); ++i)
      width[i] = std::max(width[i], c[i].size());
  }
  auto line = [&](const std::vector<std::string>& c, const std::string& last) {
    for (size_t i = 0; i < c.size(); ++i)
      out << std::left << std::setw(static_cast<int>(width[i]) + 2) << c[i];
    out << last << "\n";
  };
  out << "deployment " << dep.name << "\n";
  line(heads, "ACTORS");
  size_t healthy = 0;
  for (auto& r : rows) {
    line(cells(r), r.actors);
    healthy += r.healthy ? 1 : 0;
  }
  out << healthy << "/" << rows.size() << " nodes up\n";
  return healthy == rows.size() ? 0 : 1;
}

} // namespace prfaas::app

// The /cluster body: every node's /overview (node_observer) merged into one picture of
// the deployment. What each part is made of is said where it is built.

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "prfaas/runtime/cluster_view.hpp"

namespace prfaas {

namespace {

using json = nlohmann::json;

std::string label(const json& series, const std::string& name) {
  return series.value("labels", json::object()).value(name, "");
}

/// The current value of family `name` on `ov` whose labels include `match`; null if none.
json current(const json& ov, const std::string& name,
             const std::map<std::string, std::string>& match = {}) {
  for (auto& c : ov.value("current", json::array())) {
    if (c.value("name", "") != name)
      continue;
    bool ok = true;
    for (auto& [k, v] : match)
      ok = ok && label(c, k) == v;
    if (ok)
      return c["value"];
  }
  return nullptr;
}

/// The sum over every series of family `name` on `ov` (0 if none), by one label.
void add_by(const json& ov, const std::string& name, const std::string& by, json& into) {
  for (auto& c : ov.value("current", json::array()))
    if (c.value("name", "") == name && c["value"].is_number()) {
      const std::string key = by.empty() ? "total" : label(c, by);
      into[key] = into.value(key, 0.0) + c["value"].get<double>();
    }
}

/// The time series of family `name` with labels `match` on `ov`: {times, values}.
json history(const json& ov, const std::string& name,
             const std::map<std::string, std::string>& match = {}) {
  const auto& h = ov.value("history", json::object());
  for (auto& s : h.value("series", json::array())) {
    if (s.value("name", "") != name)
      continue;
    bool ok = true;
    for (auto& [k, v] : match)
      ok = ok && label(s, k) == v;
    if (ok)
      return {{"times", h.value("times", json::array())}, {"values", s["values"]}};
  }
  return nullptr;
}

const char* link_state_name(const json& v) {
  if (!v.is_number())
    return "unknown";
  switch (static_cast<int>(v.get<double>())) {
  case 1:
    return "up";
  case 2:
    return "degraded";
  case 3:
    return "down";
  default:
    return "unknown";
  }
}

/// Each declared link, and per direction what the monitor on its sending side measures.
json links_of(const deployment_config& dep, const std::map<std::string, json>& ovs) {
  json links = json::array();
  for (auto& l : dep.link_list) {
    json dirs = json::array();
    for (auto& [node, ov] : ovs)
      for (auto& c : ov.value("current", json::array())) {
        if (c.value("name", "") != "prfaas_link_state")
          continue;
        const std::string from = label(c, "cluster"), to = label(c, "peer_cluster");
        if (!((from == l.a && to == l.b) || (from == l.b && to == l.a)))
          continue;
        const std::map<std::string, std::string> m{{"cluster", from}, {"peer_cluster", to}};
        dirs.push_back({{"from", from},
                        {"to", to},
                        {"monitor", node},
                        {"state", link_state_name(c["value"])},
                        {"throughput_bps", current(ov, "prfaas_link_throughput_bps", m)},
                        {"utilisation", current(ov, "prfaas_link_utilisation", m)},
                        {"backlog_bytes", current(ov, "prfaas_link_backlog_bytes", m)},
                        {"rtt_seconds", current(ov, "prfaas_link_rtt_seconds", m)},
                        {"throughput_history", history(ov, "prfaas_link_throughput_bps", m)},
                        {"backlog_history", history(ov, "prfaas_link_backlog_bytes", m)}});
      }
    links.push_back({{"between", {l.a, l.b}}, {"rate_bps", l.rate_bps}, {"directions", dirs}});
  }
  return links;
}

/// Every scheduler: t now, planned, scarce or abundant, link up, t's history and the
/// controller's recent moves with their reasons.
json schedulers_of(const std::map<std::string, json>& ovs) {
  json out = json::array();
  for (auto& [node, ov] : ovs) {
    const json t = current(ov, "prfaas_scheduler_threshold_tokens");
    if (t.is_null() && current(ov, "prfaas_scheduler_link_up").is_null())
      continue;
    const json moves = ov.value("events", json::object()).value("threshold", json::array());
    out.push_back({{"node", node},
                   {"threshold", t},
                   {"planned", current(ov, "prfaas_scheduler_planned_threshold_tokens")},
                   {"scarce", current(ov, "prfaas_scheduler_bandwidth_scarce")},
                   {"link_up", current(ov, "prfaas_scheduler_link_up")},
                   {"last_decision", moves.empty() ? json(nullptr) : moves.back()},
                   {"decisions", moves},
                   {"threshold_history", history(ov, "prfaas_scheduler_threshold_tokens")}});
  }
  return out;
}

json workers_of(const std::map<std::string, json>& ovs) {
  json out = json::array();
  for (auto& [node, ov] : ovs)
    for (auto& c : ov.value("current", json::array())) {
      if (c.value("name", "") != "prfaas_worker_queue_depth")
        continue;
      const std::map<std::string, std::string> m{{"worker", label(c, "worker")}};
      out.push_back({{"node", node},
                     {"worker", label(c, "worker")},
                     {"role", label(c, "role")},
                     {"queue", c["value"]},
                     {"active", current(ov, "prfaas_worker_active", m)},
                     {"load", current(ov, "prfaas_worker_load", m)}});
    }
  return out;
}

/// Routes, outcomes, failovers, cache hit ratio, latency quantiles and the last
/// requests, over every gateway (summed; quantiles per gateway node).
void serving_of(const std::map<std::string, json>& ovs, json& out) {
  json routes = json::object(), outcomes = json::object(), failovers = json::object(),
       resumes = json::object(), prompt = json::object(), cached = json::object();
  json latency = json::object(), requests = json::array();
  for (auto& [node, ov] : ovs) {
    add_by(ov, "prfaas_scheduler_routes_total", "route", routes);
    add_by(ov, "prfaas_gateway_requests_total", "outcome", outcomes);
    add_by(ov, "prfaas_gateway_failovers_total", "", failovers);
    add_by(ov, "prfaas_gateway_decode_resumes_total", "", resumes);
    add_by(ov, "prfaas_gateway_prompt_tokens_sum", "", prompt);
    add_by(ov, "prfaas_gateway_cached_tokens_sum", "", cached);
    const auto& q = ov.value("quantiles", json::object());
    if (q.contains("ttft_seconds") || q.contains("tpot_seconds"))
      latency[node] = q;
    for (auto& r : ov.value("events", json::object()).value("request", json::array()))
      requests.push_back(r);
  }
  std::sort(requests.begin(), requests.end(), [](const json& a, const json& b) {
    return a.value("time", 0.0) > b.value("time", 0.0);
  });
  if (requests.size() > 20)
    requests.erase(requests.begin() + 20, requests.end());
  const double p = prompt.value("total", 0.0), c = cached.value("total", 0.0);
  out["routes"] = routes;
  out["outcomes"] = outcomes;
  out["failovers"] = failovers.value("total", 0.0);
  out["decode_resumes"] = resumes.value("total", 0.0);
  out["cache"] = {{"prompt_tokens", p},
                  {"cached_tokens", c},
                  {"hit_ratio", p > 0 ? json(c / p) : json(nullptr)}};
  out["latency"] = latency;
  out["requests"] = requests;
}

} // namespace

std::string cluster_json(const deployment_config& dep, const cluster_gathering& g,
                         const std::string& served_by) {
  std::map<std::string, json> ovs;
  for (auto& [node, text] : g.overviews)
    ovs[node] = json::parse(text, nullptr, false);
  for (auto it = ovs.begin(); it != ovs.end();)
    it = it->second.is_discarded() ? ovs.erase(it) : std::next(it);
  json out;
  out["deployment"] = dep.name;
  out["served_by"] = served_by;
  out["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  json clusters = json::array(), nodes = json::array();
  for (auto& [name, c] : dep.clusters)
    clusters.push_back({{"name", name}, {"kind", c.kind}});
  for (auto& r : g.rows)
    nodes.push_back({{"name", r.node},
                     {"cluster", r.cluster},
                     {"state", r.state},
                     {"healthy", r.healthy},
                     {"incarnation", r.incarnation},
                     {"seen_by_peers", r.seen},
                     {"roles", r.roles},
                     {"actors", r.actors}});
  out["clusters"] = clusters;
  out["nodes"] = nodes;
  out["healthy_nodes"] = g.healthy();
  out["links"] = links_of(dep, ovs);
  out["schedulers"] = schedulers_of(ovs);
  out["workers"] = workers_of(ovs);
  serving_of(ovs, out);
  return out.dump();
}

} // namespace prfaas

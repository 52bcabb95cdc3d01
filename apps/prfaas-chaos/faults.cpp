#include "faults.hpp"

#include "probe.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <unistd.h>

namespace prfaas::chaos {

namespace {

std::string table_name(size_t id) {
  return "prfaas_chaos_" + std::to_string(id);
}

} // namespace

bool nft_installed() {
  for (auto dir : {"/usr/sbin/", "/sbin/", "/usr/bin/"})
    if (::access((std::string{dir} + "nft").c_str(), X_OK) == 0)
      return true;
  return false;
}

std::string unsupported(const fault_spec& f, const topology& t) {
  switch (f.kind) {
  case fault_kind::link_down:
  case fault_kind::rate:
    if (!t.link_for(f))
      return f.path + ": " + to_string(f.kind) + " needs the netns topology (a veth link), not " +
             to_string(t.kind());
    return {};
  case fault_kind::blackhole:
    if (!nft_installed())
      return "nft missing (tools/bootstrap.sh installs nftables)";
    if (!t.private_network())
      return "no private network namespace: nft rules would cut the machine's own loopback";
    return {};
  default:
    return {};
  }
}

injector::~injector() {
  while (!active_.empty()) {
    try {
      undo(active_.begin()->first);
    } catch (const std::exception&) {
      active_.erase(active_.begin()); // the namespaces go with the topology anyway
    }
  }
}

void injector::must(const std::string& ns, std::vector<std::string> argv) {
  std::string out;
  if (!topo_.run_in(ns, argv, out)) {
    std::string line;
    for (auto& a : argv)
      line += (line.empty() ? "" : " ") + a;
    throw std::runtime_error("fault command failed" + (ns.empty() ? "" : " in " + ns) + ": " +
                             line + "\n" + out);
  }
}

void injector::tbf(const link_place& l, const std::string& rate) {
  for (auto& ns : {l.ns_a, l.ns_b})
    must(ns, {"tc", "qdisc", "change", "dev", l.dev, "root", "tbf", "rate", rate, "burst", "256kb",
              "latency", "50ms"});
}

injector::tbf_stats injector::read_tbf(const link_place& l) {
  tbf_stats st;
  for (auto& ns : {l.ns_a, l.ns_b}) {
    std::string out;
    if (!topo_.query_in(ns, {"tc", "-s", "-j", "qdisc", "show", "dev", l.dev}, out))
      throw std::runtime_error("tc -s qdisc show dev " + l.dev + " in " + ns + " failed: " + out);
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.empty())
      throw std::runtime_error("tc gave no qdisc for " + l.dev + " in " + ns + ": " + out);
    (ns == l.ns_a ? st.bytes_a : st.bytes_b) = j[0].value("bytes", uint64_t{0});
    st.overlimits += j[0].value("overlimits", uint64_t{0});
  }
  return st;
}

std::optional<rule_counts> injector::counts(size_t id) const {
  auto it = counts_.find(id);
  return it == counts_.end() ? std::nullopt : std::optional{it->second};
}

std::optional<link_usage> injector::usage(size_t id) const {
  auto it = usage_.find(id);
  return it == usage_.end() ? std::nullopt : std::optional{it->second};
}

void injector::apply(size_t id, const fault_spec& f) {
  switch (f.kind) {
  case fault_kind::kill:
    topo_.kill(f.node);
    break;
  case fault_kind::pause:
    topo_.signal(f.node, SIGSTOP);
    break;
  case fault_kind::link_down:
    must(topo_.link_for(f)->ns_a, {"ip", "link", "set", topo_.link_for(f)->dev, "down"});
    break;
  case fault_kind::rate:
    tbf(*topo_.link_for(f), f.rate);
    rate_start_[id] = {std::chrono::steady_clock::now(), read_tbf(*topo_.link_for(f))};
    break;
  case fault_kind::blackhole:
    blackhole(id, f, true);
    break;
  case fault_kind::fault_point:
    break; // below, once it counts as active
  }
  active_[id] = f;
  if (f.kind == fault_kind::fault_point)
    fired_before_[id] = arm_point(f.node, f.point);
}

void injector::undo(size_t id) {
  auto it = active_.find(id);
  if (it == active_.end())
    return;
  auto f = it->second;
  active_.erase(it);
  switch (f.kind) {
  case fault_kind::kill:
    topo_.start(f.node);
    break;
  case fault_kind::pause:
    topo_.signal(f.node, SIGCONT);
    break;
  case fault_kind::link_down:
    must(topo_.link_for(f)->ns_a, {"ip", "link", "set", topo_.link_for(f)->dev, "up"});
    for (auto& route : topo_.link_for(f)->routes)
      must("", route);
    break;
  case fault_kind::rate: {
    auto& l = *topo_.link_for(f);
    auto [t0, before] = rate_start_[id];
    auto after = read_tbf(l);
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto busier = std::max(after.bytes_a - before.bytes_a, after.bytes_b - before.bytes_b);
    usage_[id] = {secs > 0 ? 8.0 * static_cast<double>(busier) / secs : 0,
                  after.overlimits - before.overlimits};
    tbf(l, l.rate);
    break;
  }
  case fault_kind::blackhole:
    blackhole(id, f, false);
    break;
  case fault_kind::fault_point: {
    auto after = arm_point(f.node, f.point);
    auto before = fired_before_[id];
    if (after && before && *after >= *before)
      fired_[id] = *after - *before;
    break;
  }
  }
}

std::optional<uint64_t> injector::fired(size_t id) const {
  auto i = fired_.find(id);
  return i == fired_.end() ? std::nullopt : std::optional<uint64_t>{i->second};
}

std::optional<uint64_t> injector::arm_point(const std::string& node, const std::string& point) {
  // Overlapping faults on one point of one node: the highest active probability holds.
  double p = 0;
  for (auto& [_, f] : active_)
    if (f.kind == fault_kind::fault_point && f.node == node && f.point == point)
      p = std::max(p, f.probability);
  const auto& n = topo_.place(node);
  char body[32];
  std::snprintf(body, sizeof body, "%.6g", p);
  // A node that is down (killed, not restarted yet) cannot be armed; it restarts clean.
  std::string answer;
  if (auto err = http_put(n.ns, n.ip, n.admin_port, "/faults/" + point, body, answer);
      !err.empty()) {
    std::cerr << "prfaas-chaos: fault point " << point << " on " << node << " not set: " << err
              << std::endl;
    return std::nullopt;
  }
  auto at = answer.find("fired=");
  if (at == std::string::npos)
    return std::nullopt;
  return std::strtoull(answer.c_str() + at + 6, nullptr, 10);
}

void injector::blackhole(size_t id, const fault_spec& f, bool on) {
  if (topo_.kind() != topology_kind::netns) {
    blackhole_loopback(id, f, on);
    return;
  }
  const auto table = table_name(id);
  if (!on) {
    auto ns = rule_ns_[id];
    std::string out;
    if (topo_.query_in(ns, {"nft", "-j", "list", "table", "inet", table}, out))
      counts_[id] = read_counts(out);
    must(ns, {"nft", "delete", "table", "inet", table});
    return;
  }
  auto where = [&](const std::string& n) {
    const auto& p = topo_.place(n);
    return node_address{p.ip, p.control_port, p.data_port};
  };
  auto rules = plan_blackhole(f, where, precise_);
  // Every packet to or from `from` is routed by its cluster's switch.
  auto ns = topo_.switch_of(f.from);
  auto file = topo_.log_of("blackhole-" + std::to_string(id));
  file.replace_extension(".nft");
  std::ofstream{file} << render_forward_table(table, rules);
  must(ns, {"nft", "-f", file.string()});
  rule_ns_[id] = ns;
}

void injector::blackhole_loopback(size_t id, const fault_spec& f, bool on) {
  // One namespace shared by every node: rules for every (sender, receiver) pair on
  // the receivers' ports.
  std::ostringstream out_rules, in_rules;
  auto cut = [&](const std::string& dst) {
    const auto& d = topo_.place(dst);
    const auto ports =
        "{ " + std::to_string(d.control_port) + ", " + std::to_string(d.data_port) + " }";
    out_rules << "    ip daddr " << d.ip << " tcp dport " << ports << " drop\n";
    in_rules << "    ip saddr " << d.ip << " tcp sport " << ports << " drop\n";
  };
  for (auto& to : f.to) {
    cut(to);
    if (f.both_ways)
      cut(f.from);
  }
  const auto ns = topo_.place(f.from).ns;
  if (!on) {
    must(ns, {"nft", "delete", "table", "inet", table_name(id)});
    return;
  }
  std::ostringstream text;
  text << "table inet " << table_name(id) << " {\n"
       << "  chain out {\n    type filter hook output priority -10; policy accept;\n"
       << out_rules.str() << "  }\n"
       << "  chain in {\n    type filter hook input priority -10; policy accept;\n"
       << in_rules.str() << "  }\n}\n";
  auto file = topo_.log_of("blackhole-" + std::to_string(id));
  file.replace_extension(".nft");
  std::ofstream{file} << text.str();
  must(ns, {"nft", "-f", file.string()});
}

} // namespace prfaas::chaos

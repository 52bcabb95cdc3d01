#include "faults.hpp"

#include <fstream>
#include <sstream>

#include <unistd.h>

namespace prfaas::chaos {

namespace {

std::string table_name(size_t id) {
  return "prfaas_chaos_" + std::to_string(id);
}

bool nft_installed() {
  for (auto dir : {"/usr/sbin/", "/sbin/", "/usr/bin/"})
    if (::access((std::string{dir} + "nft").c_str(), X_OK) == 0)
      return true;
  return false;
}

} // namespace

std::string unsupported(const fault_spec& f, const topology& t) {
  switch (f.kind) {
  case fault_kind::link_down:
  case fault_kind::rate:
    if (!t.link())
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

void injector::tbf(const std::string& rate) {
  auto l = *topo_.link();
  for (auto [ns, dev] : {std::pair{l.ns_a, l.veth_a}, std::pair{l.ns_b, l.veth_b}})
    must(ns, {"tc", "qdisc", "change", "dev", dev, "root", "tbf", "rate", rate, "burst", "256kb",
              "latency", "50ms"});
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
    must(topo_.link()->ns_a, {"ip", "link", "set", topo_.link()->veth_a, "down"});
    break;
  case fault_kind::rate:
    tbf(f.rate);
    break;
  case fault_kind::blackhole:
    blackhole(id, f, true);
    break;
  }
  active_[id] = f;
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
    must(topo_.link()->ns_a, {"ip", "link", "set", topo_.link()->veth_a, "up"});
    break;
  case fault_kind::rate:
    tbf(topo_.link()->rate);
    break;
  case fault_kind::blackhole:
    blackhole(id, f, false);
    break;
  }
}

void injector::blackhole(size_t id, const fault_spec& f, bool on) {
  // One table per fault and namespace: rules for every (sender, receiver) pair whose
  // sender lives there.
  std::map<std::string, std::ostringstream> out_rules, in_rules;
  auto cut = [&](const std::string& src, const std::string& dst) {
    const auto& s = topo_.place(src);
    const auto& d = topo_.place(dst);
    const auto ports =
        "{ " + std::to_string(d.control_port) + ", " + std::to_string(d.data_port) + " }";
    out_rules[s.ns] << "    ip daddr " << d.ip << " tcp dport " << ports << " drop\n";
    in_rules[s.ns] << "    ip saddr " << d.ip << " tcp sport " << ports << " drop\n";
  };
  for (auto& to : f.to) {
    cut(f.from, to);
    if (f.both_ways)
      cut(to, f.from);
  }
  for (auto& [ns, rules] : out_rules) {
    if (!on) {
      must(ns, {"nft", "delete", "table", "inet", table_name(id)});
      continue;
    }
    std::ostringstream text;
    text << "table inet " << table_name(id) << " {\n"
         << "  chain out {\n    type filter hook output priority -10; policy accept;\n"
         << rules.str() << "  }\n"
         << "  chain in {\n    type filter hook input priority -10; policy accept;\n"
         << in_rules[ns].str() << "  }\n}\n";
    auto file = topo_.log_of("blackhole-" + std::to_string(id) + (ns.empty() ? "" : "-" + ns));
    file.replace_extension(".nft");
    std::ofstream{file} << text.str();
    must(ns, {"nft", "-f", file.string()});
  }
}

} // namespace prfaas::chaos

#include "nft_rules.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace prfaas::chaos {

namespace {

std::string port_set(const std::vector<int>& ports) {
  std::string s = "{ ";
  for (size_t i = 0; i < ports.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ports[i]);
  return s + " }";
}

std::string render(const nft_match& m) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (!m.saddr.empty())
    add("ip saddr " + m.saddr);
  if (!m.daddr.empty())
    add("ip daddr " + m.daddr);
  if (!m.ct_direction.empty())
    add("ct direction " + m.ct_direction);
  if (!m.dports.empty())
    add("tcp dport " + port_set(m.dports));
  if (!m.sports.empty())
    add("tcp sport " + port_set(m.sports));
  return s;
}

} // namespace

blackhole_rules plan_blackhole(const fault_spec& f,
                               const std::function<node_address(const std::string&)>& where,
                               bool precise) {
  blackhole_rules r;
  const auto from = where(f.from);
  for (auto& to_name : f.to) {
    const auto to = where(to_name);
    r.named_pairs.emplace_back(from.ip, to.ip);
    r.named_pairs.emplace_back(to.ip, from.ip);
    if (!precise) {
      auto cut_to = [&](const node_address& d) {
        r.drops.push_back({"", d.ip, "", {d.control_port, d.data_port}, {}});
        r.drops.push_back({d.ip, "", "", {}, {d.control_port, d.data_port}});
      };
      cut_to(to);
      if (f.both_ways)
        cut_to(from);
      continue;
    }
    if (f.both_ways) {
      r.drops.push_back({from.ip, to.ip, "", {}, {}});
      r.drops.push_back({to.ip, from.ip, "", {}, {}});
    } else {
      r.drops.push_back({from.ip, to.ip, "original", {}, {}});
      r.drops.push_back({to.ip, from.ip, "reply", {}, {}});
    }
  }
  return r;
}

bool matches_only_named(const blackhole_rules& r) {
  return std::all_of(r.drops.begin(), r.drops.end(), [&](const nft_match& m) {
    return !m.saddr.empty() && !m.daddr.empty() &&
           std::find(r.named_pairs.begin(), r.named_pairs.end(), std::pair{m.saddr, m.daddr}) !=
               r.named_pairs.end();
  });
}

std::string render_forward_table(const std::string& table, const blackhole_rules& r) {
  std::string pairs;
  for (auto& [s, d] : r.named_pairs)
    pairs += (pairs.empty() ? "" : ", ") + s + " . " + d;
  std::ostringstream t;
  t << "table inet " << table << " {\n"
    << "  chain forward {\n    type filter hook forward priority -10; policy accept;\n";
  for (auto& m : r.drops) {
    t << "    " << render(m) << " ip saddr . ip daddr != { " << pairs
      << " } counter comment \"collateral\"\n";
    t << "    " << render(m) << " counter drop comment \"drop\"\n";
  }
  t << "  }\n}\n";
  return t.str();
}

rule_counts read_counts(const std::string& text) {
  rule_counts c;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("nftables"))
    throw std::runtime_error("not an nft JSON listing: " + text.substr(0, 200));
  for (auto& o : j["nftables"]) {
    if (!o.contains("rule"))
      continue;
    auto& rule = o["rule"];
    uint64_t packets = 0;
    for (auto& e : rule.value("expr", nlohmann::json::array()))
      if (e.contains("counter"))
        packets += e["counter"].value("packets", uint64_t{0});
    auto comment = rule.value("comment", std::string{});
    if (comment == "drop")
      c.dropped += packets;
    else if (comment == "collateral")
      c.collateral += packets;
  }
  return c;
}

} // namespace prfaas::chaos

#include "scenario.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/faults.hpp"

namespace prfaas::chaos {

namespace {

/// Reads one mapping, remembering its key path so every error names it.
class reader {
public:
  reader(const std::string& source, YAML::Node n, std::string path)
      : source_(source), n_(std::move(n)), path_(std::move(path)) {
    if (!n_.IsMap())
      fail(path_, "expected a mapping");
  }

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw config_error(source_, path, reason);
  }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  /// Every key must be one of `known`.
  void only(const std::set<std::string>& known) const {
    for (auto kv : n_) {
      auto k = kv.first.as<std::string>();
      if (!known.count(k)) {
        std::string list;
        for (auto& x : known)
          list += (list.empty() ? "" : ", ") + x;
        fail(at(k), "unknown key (known: " + list + ")");
      }
    }
  }

  bool has(const std::string& key) const { return n_[key] && !n_[key].IsNull(); }
  YAML::Node node(const std::string& key) const { return n_[key]; }

  std::string str(const std::string& key) const {
    auto v = required(key);
    if (!v.IsScalar())
      fail(at(key), "expected a string");
    return v.as<std::string>();
  }
  std::string str(const std::string& key, const std::string& dflt) const {
    return has(key) ? str(key) : dflt;
  }

  double number(const std::string& key, double dflt, double lo, double hi) const {
    if (!has(key))
      return dflt;
    double v;
    try {
      v = n_[key].as<double>();
    } catch (const YAML::Exception&) {
      fail(at(key), "expected a number, got \"" + scalar(key) + "\"");
    }
    if (!(v >= lo && v <= hi))
      fail(at(key), "must be within [" + fmt(lo) + ", " + fmt(hi) + "], got " + scalar(key));
    return v;
  }

  uint64_t integer(const std::string& key, uint64_t dflt, uint64_t lo, uint64_t hi) const {
    if (!has(key))
      return dflt;
    uint64_t v;
    try {
      v = n_[key].as<uint64_t>();
    } catch (const YAML::Exception&) {
      fail(at(key), "expected a whole number, got \"" + scalar(key) + "\"");
    }
    if (v < lo || v > hi)
      fail(at(key), "must be within [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got " + scalar(key));
    return v;
  }

  bool boolean(const std::string& key, bool dflt) const {
    if (!has(key))
      return dflt;
    try {
      return n_[key].as<bool>();
    } catch (const YAML::Exception&) {
      fail(at(key), "expected true or false, got \"" + scalar(key) + "\"");
    }
  }

  std::optional<seconds> dur(const std::string& key) const {
    if (!has(key))
      return std::nullopt;
    auto text = scalar(key);
    try {
      auto d = std::chrono::duration_cast<seconds>(parse_duration(text));
      if (d.count() < 0)
        fail(at(key), "must not be negative");
      return d;
    } catch (const std::invalid_argument&) {
      fail(at(key), "expected a duration (e.g. 3s, 500ms), got \"" + text + "\"");
    }
  }
  seconds dur(const std::string& key, seconds dflt) const { return dur(key).value_or(dflt); }

  YAML::Node required(const std::string& key) const {
    if (!has(key))
      fail(at(key), "missing");
    return n_[key];
  }

private:
  std::string scalar(const std::string& key) const {
    auto v = n_[key];
    return v.IsScalar() ? v.as<std::string>()
                        : "<" + std::string{v.IsMap() ? "mapping" : "list"} + ">";
  }
  static std::string fmt(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

  const std::string& source_;
  YAML::Node n_;
  std::string path_;
};

std::string secs(seconds s) {
  std::ostringstream o;
  o << s.count() << " s";
  return o.str();
}

input_lengths read_input(const std::string& source, const reader& load) {
  input_lengths in;
  if (!load.has("input_tokens"))
    return in;
  auto n = load.node("input_tokens");
  if (n.IsScalar()) {
    in.fixed = static_cast<uint32_t>(load.integer("input_tokens", 0, 1, 1u << 20));
    return in;
  }
  reader r{source, n, load.at("input_tokens")};
  r.only({"mu", "sigma", "min", "max"});
  in.mu = r.number("mu", in.mu, 0, 20);
  in.sigma = r.number("sigma", in.sigma, 0, 10);
  in.min = r.number("min", in.min, 1, 1 << 20);
  in.max = r.number("max", in.max, 1, 1 << 20);
  if (in.max < in.min)
    r.fail(r.at("max"), "must not be below min");
  return in;
}

/// `link: [a, b]`: two cluster names (the deployment's links: are checked when it runs).
std::vector<std::string> link_of(const reader& r) {
  if (!r.has("link"))
    return {};
  auto v = r.node("link");
  if (!v.IsSequence() || v.size() != 2 || !v[0].IsScalar() || !v[1].IsScalar() ||
      v[0].as<std::string>() == v[1].as<std::string>())
    r.fail(r.at("link"), "expected two different cluster names, e.g. [prfaas, pd]");
  return {v[0].as<std::string>(), v[1].as<std::string>()};
}

void read_fault_point(const reader& r, fault_spec& f) {
  f.kind = fault_kind::fault_point;
  f.node = r.str("node");
  f.point = r.str("point"); // known to the nodes? check_points, where they are linked
  r.required("probability");
  f.probability = r.number("probability", 0, 0, 1);
  if (f.probability == 0)
    r.fail(r.at("probability"), "must be above 0");
}

fault_spec read_fault(const std::string& source, YAML::Node n, const std::string& path) {
  reader r{source, n, path};
  fault_spec f;
  f.path = path;
  const auto kind = r.str("fault");
  r.required("at");
  f.at = *r.dur("at");
  f.detect_within = r.dur("detect_within");
  f.recover_within = r.dur("recover_within");
  const std::set<std::string> common{"fault", "at", "detect_within", "recover_within"};
  auto allow = [&](std::set<std::string> more) {
    more.insert(common.begin(), common.end());
    r.only(more);
  };
  auto lasting = [&] {
    f.lasts = r.dur("for");
    if (!f.lasts)
      r.fail(r.at("for"), "missing (how long the fault lasts)");
  };
  if (kind == "kill") {
    f.kind = fault_kind::kill;
    allow({"node", "restart_after"});
    f.node = r.str("node");
    f.restart_after = r.dur("restart_after");
  } else if (kind == "pause") {
    f.kind = fault_kind::pause;
    allow({"node", "for"});
    f.node = r.str("node");
    lasting();
  } else if (kind == "link_down") {
    f.kind = fault_kind::link_down;
    allow({"for", "link"});
    f.link = link_of(r);
    lasting();
  } else if (kind == "rate") {
    f.kind = fault_kind::rate;
    allow({"rate", "for", "link"});
    f.link = link_of(r);
    f.rate = r.str("rate");
    try {
      if (parse_rate(f.rate) == 0)
        r.fail(r.at("rate"), "must be above 0");
    } catch (const std::invalid_argument&) {
      r.fail(r.at("rate"), "expected a rate (e.g. 8mbit), got \"" + f.rate + "\"");
    }
    lasting();
  } else if (kind == "blackhole") {
    f.kind = fault_kind::blackhole;
    allow({"from", "to", "for", "both_ways"});
    f.from = r.str("from");
    auto to = r.required("to");
    if (to.IsScalar()) {
      f.to.push_back(to.as<std::string>());
    } else if (to.IsSequence() && to.size() > 0) {
      for (size_t i = 0; i < to.size(); ++i) {
        if (!to[i].IsScalar())
          r.fail(r.at("to") + "[" + std::to_string(i) + "]", "expected a node name");
        f.to.push_back(to[i].as<std::string>());
      }
    } else {
      r.fail(r.at("to"), "expected a node name or a non-empty list of them");
    }
    for (auto& t : f.to)
      if (t == f.from)
        r.fail(r.at("to"), "a node cannot be blackholed from itself (" + t + ")");
    f.both_ways = r.boolean("both_ways", false);
    lasting();
  } else if (kind == "fault_point") {
    allow({"node", "point", "probability", "for"});
    read_fault_point(r, f);
    lasting();
  } else {
    r.fail(r.at("fault"),
           "unknown fault \"" + kind + "\" (kill, pause, link_down, rate, blackhole, fault_point)");
  }
  return f;
}

} // namespace

std::string to_string(topology_kind k) {
  return k == topology_kind::netns ? "netns" : "loopback";
}

std::string to_string(fault_kind k) {
  switch (k) {
  case fault_kind::kill:
    return "kill";
  case fault_kind::pause:
    return "pause";
  case fault_kind::link_down:
    return "link_down";
  case fault_kind::rate:
    return "rate";
  case fault_kind::blackhole:
    return "blackhole";
  case fault_kind::fault_point:
    return "fault_point";
  }
  return "?";
}

std::optional<seconds> fault_spec::ends() const {
  if (kind == fault_kind::kill)
    return restart_after ? std::optional<seconds>{at + *restart_after} : std::nullopt;
  return at + *lasts;
}

std::string fault_spec::describe() const {
  const auto on_link = link.empty() ? std::string{} : " " + link[0] + "-" + link[1];
  switch (kind) {
  case fault_kind::kill:
    return "kill -9 " + node +
           (restart_after ? ", restart after " + secs(*restart_after) : ", no restart");
  case fault_kind::pause:
    return "SIGSTOP " + node + " for " + secs(*lasts) + ", then SIGCONT";
  case fault_kind::link_down:
    return "link" + on_link + " down for " + secs(*lasts);
  case fault_kind::rate:
    return "link" + on_link + " rate " + rate + " for " + secs(*lasts);
  case fault_kind::blackhole: {
    std::string to_list;
    for (auto& t : to)
      to_list += (to_list.empty() ? "" : ",") + t;
    return "blackhole " + from + (both_ways ? " <-> " : " -> ") + to_list + " for " + secs(*lasts);
  }
  case fault_kind::fault_point: {
    char p[32];
    std::snprintf(p, sizeof p, "%g", probability);
    return "fault point " + point + " at " + p + " on " + node + " for " + secs(*lasts);
  }
  }
  return "?";
}

scenario parse_scenario(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw config_error(source, "", "not valid YAML: " + std::string{e.what()});
  }
  reader top{source, root, ""};
  top.only({"name", "deployment", "topology", "fallback", "load", "faults"});
  scenario s;
  s.source = source;
  s.name = top.str("name");
  s.deployment = top.str("deployment");
  auto topo = top.str("topology", "netns");
  if (topo == "netns")
    s.topology = topology_kind::netns;
  else if (topo == "loopback")
    s.topology = topology_kind::loopback;
  else
    top.fail("topology", "expected netns or loopback, got \"" + topo + "\"");
  auto fb = top.str("fallback", "skip");
  if (fb != "loopback" && fb != "skip")
    top.fail("fallback", "expected loopback or skip, got \"" + fb + "\"");
  s.fallback_loopback = fb == "loopback";

  reader load{source, top.required("load"), "load"};
  load.only(
      {"rate", "duration", "input_tokens", "output_tokens", "stream_fraction", "seed", "deadline"});
  s.load.rate = load.number("rate", s.load.rate, 0.01, 1000);
  s.load.duration = load.dur("duration", s.load.duration);
  if (s.load.duration.count() <= 0)
    load.fail(load.at("duration"), "must be above 0");
  s.load.input = read_input(source, load);
  s.load.output_tokens = static_cast<uint32_t>(load.integer("output_tokens", 16, 1, 8192));
  s.load.stream_fraction = load.number("stream_fraction", s.load.stream_fraction, 0, 1);
  s.load.seed = load.integer("seed", 1, 0, UINT64_MAX);
  s.load.deadline = load.dur("deadline", s.load.deadline);
  if (s.load.deadline.count() <= 0)
    load.fail(load.at("deadline"), "must be above 0");

  auto faults = top.required("faults");
  if (!faults.IsSequence() || faults.size() == 0)
    top.fail("faults", "expected a non-empty list of faults");
  for (size_t i = 0; i < faults.size(); ++i) {
    auto path = "faults[" + std::to_string(i) + "]";
    s.faults.push_back(read_fault(source, faults[i], path));
    auto& f = s.faults.back();
    if (f.at >= s.load.duration)
      top.fail(path + ".at",
               "the fault must start while the load runs (duration " + secs(s.load.duration) + ")");
    // One process cannot be killed or paused twice at once: undoing one would undo both.
    for (size_t j = 0; j + 1 < s.faults.size(); ++j) {
      auto& g = s.faults[j];
      bool on_process = !f.node.empty() && g.node == f.node;
      bool overlap =
          f.at < g.ends().value_or(seconds::max()) && g.at < f.ends().value_or(seconds::max());
      if (on_process && overlap)
        top.fail(path, "overlaps " + g.path + " on node " + f.node);
    }
  }
  return s;
}

scenario load_scenario(const std::string& file) {
  std::ifstream in{file};
  if (!in)
    throw config_error(file, "", "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), file);
}

void check_nodes(const scenario& s, const std::vector<std::string>& nodes) {
  auto known = [&](const std::string& n) {
    return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
  };
  auto list = [&] {
    std::string l;
    for (auto& n : nodes)
      l += (l.empty() ? "" : ", ") + n;
    return l;
  };
  for (auto& f : s.faults) {
    std::vector<std::pair<std::string, std::string>> named; // (key, node)
    if (!f.node.empty())
      named.emplace_back("node", f.node);
    if (!f.from.empty())
      named.emplace_back("from", f.from);
    for (auto& t : f.to)
      named.emplace_back("to", t);
    for (auto& [key, n] : named)
      if (!known(n))
        throw config_error(s.source, f.path + "." + key,
                           "no node \"" + n + "\" in " + s.deployment + " (" + list() + ")");
  }
}

void check_links(const scenario& s, const deployment_config& d) {
  for (auto& f : s.faults) {
    if (f.kind != fault_kind::rate && f.kind != fault_kind::link_down)
      continue;
    if (!f.link.empty() && !d.find_link(f.link[0], f.link[1]))
      throw config_error(s.source, f.path + ".link",
                         "no link between " + f.link[0] + " and " + f.link[1] + " in " +
                             s.deployment + "'s links:");
    if (f.link.empty() && d.link_list.size() > 1)
      throw config_error(s.source, f.path,
                         s.deployment + " declares " + std::to_string(d.link_list.size()) +
                             " links; name the one to act on (link: [cluster, cluster])");
  }
}

void check_points(const scenario& s) {
  for (auto& f : s.faults) {
    if (f.kind != fault_kind::fault_point || is_fault_point(f.point))
      continue;
    std::string known;
    for (auto& p : fault_inventory())
      known += (known.empty() ? "" : ", ") + std::string{p.name};
    throw config_error(s.source, f.path + ".point",
                       "no fault point \"" + f.point + "\" (known: " + known + ")");
  }
}

} // namespace prfaas::chaos

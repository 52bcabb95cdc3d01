#include "nemesis.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>

namespace prfaas::chaos {

namespace {

/// Busy intervals per target (a node or a link): a new fault may not overlap one.
class calendar {
public:
  bool free(const std::vector<std::string>& targets, double from, double to) const {
    for (auto& t : targets) {
      auto it = busy_.find(t);
      if (it == busy_.end())
        continue;
      for (auto& [a, b] : it->second)
        if (from < b + 0.5 && a < to + 0.5) // half a second apart at least
          return false;
    }
    return true;
  }
  void book(const std::vector<std::string>& targets, double from, double to) {
    for (auto& t : targets)
      busy_[t].emplace_back(from, to);
  }

private:
  std::map<std::string, std::vector<std::pair<double, double>>> busy_;
};

bool runs(const node_config& n, const char* type) {
  return std::any_of(n.actors.begin(), n.actors.end(),
                     [&](const actor_config& a) { return a.type == type; });
}

std::string ms(seconds s) {
  return std::to_string(static_cast<long long>(s.count() * 1000 + 0.5)) + "ms";
}

/// The load every drawn scenario runs: the loadgen's prompt-length mix, half streamed.
scenario with_load(const std::string& deployment_path, const nemesis_options& o) {
  scenario s;
  s.deployment = deployment_path;
  s.topology = topology_kind::netns;
  s.load.rate = o.rate;
  s.load.duration = o.duration;
  s.load.input = {std::nullopt, 6.5, 1.0, 32, 3000};
  s.load.output_tokens = 16;
  s.load.stream_fraction = 0.5;
  s.load.seed = o.seed;
  s.load.deadline = seconds{30};
  return s;
}

/// Draws what `f` (of a drawn kind) acts on; returns the nodes or link it occupies.
std::vector<std::string> aim(fault_spec& f, std::mt19937_64& rng,
                             const std::vector<std::string>& workers,
                             const std::vector<std::string>& all, const deployment_config& d) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>{0, n - 1}(rng); };
  std::vector<std::string> targets;
  switch (f.kind) {
  case fault_kind::kill:
  case fault_kind::pause:
    f.node = workers[pick(workers.size())];
    targets = {f.node};
    break;
  case fault_kind::blackhole: {
    f.from = workers[pick(workers.size())];
    std::vector<std::string> others;
    for (auto& n : all)
      if (n != f.from)
        others.push_back(n);
    std::shuffle(others.begin(), others.end(), rng);
    others.resize(1 + pick(others.size()));
    f.to = others;
    f.both_ways = pick(2) == 1;
    targets = f.to;
    targets.push_back(f.from);
    break;
  }
  case fault_kind::rate:
  case fault_kind::link_down: {
    auto& l = d.link_list[pick(d.link_list.size())];
    f.link = {l.a, l.b};
    targets = {"link " + l.a + "-" + l.b};
    if (f.kind == fault_kind::rate)
      f.rate = std::to_string(8 + 4 * pick(9)) + "mbit";
    break;
  }
  case fault_kind::fault_point: // control-message loss at any node, gateways included
    f.node = all[pick(all.size())];
    f.point = "transport.drop";
    f.probability = std::round(std::uniform_real_distribution<>{0.02, 0.2}(rng)*100) / 100;
    targets = {f.node};
    break;
  }
  return targets;
}

} // namespace

scenario random_scenario(const deployment_config& d, const std::string& deployment_path,
                         const nemesis_options& o) {
  const double first = 2, last = o.duration.count() - 10;
  if (last - first < 2)
    throw std::invalid_argument("--random needs a load of at least 14 s");
  std::mt19937_64 rng{o.seed};
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>{a, b}(rng); };
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>{0, n - 1}(rng); };
  auto round_ms = [](double s) { return seconds{std::round(s * 1000) / 1000}; };

  std::vector<std::string> all, workers; // workers: may be killed or paused
  for (auto& n : d.nodes) {
    all.push_back(n.name);
    if (!runs(n, "gateway"))
      workers.push_back(n.name);
  }
  std::vector<fault_kind> kinds{fault_kind::kill, fault_kind::pause, fault_kind::blackhole,
                                fault_kind::fault_point};
  if (!d.link_list.empty()) {
    kinds.push_back(fault_kind::rate);
    kinds.push_back(fault_kind::link_down);
  }

  scenario s = with_load(deployment_path, o);
  calendar cal;
  for (size_t attempt = 0; s.faults.size() < o.faults && attempt < 200 * o.faults; ++attempt) {
    fault_spec f;
    f.kind = kinds[pick(kinds.size())];
    const bool link = f.kind == fault_kind::rate || f.kind == fault_kind::link_down;
    if (!link && workers.empty())
      continue;
    double lasts = f.kind == fault_kind::rate || f.kind == fault_kind::fault_point ? uniform(3, 8)
                   : f.kind == fault_kind::kill || f.kind == fault_kind::pause     ? uniform(0.3, 4)
                                                                               : uniform(1.5, 4);
    double at = uniform(first, last - lasts);
    if (at < first)
      continue;
    auto targets = aim(f, rng, workers, all, d);
    if (!cal.free(targets, at, at + lasts))
      continue;
    cal.book(targets, at, at + lasts);
    f.at = round_ms(at);
    if (f.kind == fault_kind::kill)
      f.restart_after = round_ms(lasts);
    else
      f.lasts = round_ms(lasts);
    const bool detectable = f.kind != fault_kind::rate && f.kind != fault_kind::fault_point;
    // The link monitor calls a link down after 2 s without an answered probe (and
    // publishes every second); the failure detector a node after 1 s.
    if (f.kind == fault_kind::link_down && lasts >= 3.5)
      f.detect_within = seconds{5};
    else if (detectable && f.kind != fault_kind::link_down && lasts >= 1.5)
      f.detect_within = seconds{3};
    if (detectable)
      f.recover_within = seconds{20};
    s.faults.push_back(f);
  }
  std::stable_sort(s.faults.begin(), s.faults.end(),
                   [](const fault_spec& a, const fault_spec& b) { return a.at < b.at; });
  // Requests must still be sent after the faults healed, or "every request sent after
  // the heal succeeds" judges nothing. The run calls the deployment healed 2 s after
  // the last fault recovered, and gives one never seen faulty 10 s: the load goes on
  // for at least 10 s past that.
  for (auto& f : s.faults)
    s.load.duration = std::max(s.load.duration, seconds{f.ends()->count() + heal_margin_s});
  for (size_t i = 0; i < s.faults.size(); ++i)
    s.faults[i].path = "faults[" + std::to_string(i) + "]";
  s.name = "random-" + std::to_string(o.seed) + "-" + std::to_string(s.faults.size()) + "-faults";
  s.source = "<random seed " + std::to_string(o.seed) + ">";
  return s;
}

std::string to_yaml(const scenario& s) {
  std::ostringstream y;
  y << "# prfaas-chaos run --random " << s.load.seed << " over " << s.deployment << "\n"
    << "name: " << s.name << "\n"
    << "deployment: " << s.deployment << "\n"
    << "topology: " << to_string(s.topology) << "\n"
    << "fallback: " << (s.fallback_loopback ? "loopback" : "skip") << "\n"
    << "load:\n"
    << "  rate: " << s.load.rate << "\n"
    << "  duration: " << ms(s.load.duration) << "\n"
    << "  input_tokens: { mu: " << s.load.input.mu << ", sigma: " << s.load.input.sigma
    << ", min: " << s.load.input.min << ", max: " << s.load.input.max << " }\n"
    << "  output_tokens: " << s.load.output_tokens << "\n"
    << "  stream_fraction: " << s.load.stream_fraction << "\n"
    << "  seed: " << s.load.seed << "\n"
    << "  deadline: " << ms(s.load.deadline) << "\n"
    << "faults:\n";
  for (auto& f : s.faults) {
    y << "  - { at: " << ms(f.at) << ", fault: " << to_string(f.kind);
    if (!f.node.empty())
      y << ", node: " << f.node;
    if (f.restart_after)
      y << ", restart_after: " << ms(*f.restart_after);
    if (!f.from.empty()) {
      y << ", from: " << f.from << ", to: [";
      for (size_t i = 0; i < f.to.size(); ++i)
        y << (i ? ", " : "") << f.to[i];
      y << "], both_ways: " << (f.both_ways ? "true" : "false");
    }
    if (!f.link.empty())
      y << ", link: [" << f.link[0] << ", " << f.link[1] << "]";
    if (!f.rate.empty())
      y << ", rate: " << f.rate;
    if (!f.point.empty())
      y << ", point: " << f.point << ", probability: " << f.probability;
    if (f.lasts)
      y << ", for: " << ms(*f.lasts);
    if (f.detect_within)
      y << ", detect_within: " << ms(*f.detect_within);
    if (f.recover_within)
      y << ", recover_within: " << ms(*f.recover_within);
    y << " }\n";
  }
  return y.str();
}

} // namespace prfaas::chaos

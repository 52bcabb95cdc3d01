#include "run.hpp"
#include "timeline.hpp"
#include "token_check.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>

#include "faults.hpp"
#include "load.hpp"
#include "probe.hpp"
#include "common/http_probe.hpp"
#include "common/progress_line.hpp"
#include "watcher.hpp"

namespace prfaas::chaos {

namespace {

using namespace std::chrono_literals;

/// The nodes a fault acts on: its node, a blackhole's ends, every node of a link's two
/// clusters (of every cluster, for "the only link").
std::set<std::string> nodes_touched(const fault_spec& f, const deployment_config& d) {
  std::set<std::string> out;
  if (!f.node.empty())
    out.insert(f.node);
  if (!f.from.empty())
    out.insert(f.from);
  out.insert(f.to.begin(), f.to.end());
  if (f.kind == fault_kind::link_down || f.kind == fault_kind::rate)
    for (auto& n : d.nodes)
      if (f.link.empty() || std::find(f.link.begin(), f.link.end(), n.cluster) != f.link.end())
        out.insert(n.name);
  return out;
}

bool overlap(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& n) { return b.count(n) > 0; });
}

/// The gateway's own accounting, for the report.
std::map<std::string, double> gateway_counters(const topology& t) {
  std::map<std::string, double> out;
  auto m = get_metrics(t.place(t.gateway().node));
  if (!m)
    return out;
  out["failovers"] = proc::metric(*m, "prfaas_gateway_failovers_total");
  for (auto o : {"completed", "failed", "prefill_failed", "decode_failed", "lost_tokens",
                 "deadline", "cancelled", "internal"})
    if (double v = proc::metric(*m, "prfaas_gateway_requests_total",
                                {"outcome=\"" + std::string{o} + "\""}))
      out[std::string{"requests_"} + o] = v;
  return out;
}

/// Prefills completed per cluster (every node's prefill workers, outcome ok).
std::map<std::string, double> prefills_by_cluster(const topology& t) {
  std::map<std::string, double> out;
  for (auto& n : t.deployment().nodes)
    if (auto m = get_metrics(t.place(n.name)))
      if (double v = proc::metric(*m, "prfaas_worker_orders_total",
                                  {"role=\"prefill\"", "outcome=\"ok\""}))
        out[n.cluster.empty() ? n.name : n.cluster] += v;
  return out;
}

/// The gateway's and every cluster's counters at the end, into the report.
void read_counters(report& rep, const topology& t) {
  rep.gateway = gateway_counters(t);
  rep.prefills = prefills_by_cluster(t);
}

/// What each node still holds: live gateway requests, queued and active worker
/// orders, data-plane bytes in flight or waiting, receive buffers reserved for chunks
/// (a partial transfer's landed chunks may stay until receive_timeout: not counted).
/// Keys "node metric"; zero values left out.
std::map<std::string, double> held(const topology& t) {
  std::map<std::string, double> out;
  for (auto& n : t.nodes()) {
    auto m = get_metrics(t.place(n));
    if (!m) {
      out[n + " /metrics"] = 1; // cannot tell: counts as held
      continue;
    }
    for (auto name : {"prfaas_gateway_live_requests", "prfaas_worker_queue_depth",
                      "prfaas_worker_active", "prfaas_data_bytes_in_flight",
                      "prfaas_data_bytes_queued", "prfaas_data_receive_buffers_reserved"})
      if (double v = proc::metric(*m, name); v != 0)
        out[n + " " + name] = v;
  }
  return out;
}

/// When the last fault had healed, in the load's time (its undo plus the recovery
/// seen, or 10 s when none was seen; a fault point has nothing to recover but the
/// messages it dropped, which a retry interval resends: 1 s), plus 2 s for the load's
/// own start-up; none when a fault never ends.
std::optional<double> healed_at(const std::vector<fault_outcome>& faults) {
  double heal = 0;
  for (auto& f : faults) {
    if (!f.undone_s)
      return std::nullopt;
    const double unseen = f.fault.kind == fault_kind::fault_point ? 1.0 : 10.0;
    heal = std::max(heal,
                    *f.undone_s + f.seen.held_s.value_or(0) + f.seen.recovered_s.value_or(unseen));
  }
  return heal + 2;
}

/// Fault `i`'s verdict from what its watcher saw and the injector measured.
fault_outcome judge_fault(const fault_spec& f, size_t i, double applied_s,
                          std::optional<double> undone_s, watcher& w, const injector& inject) {
  auto o = judge(f, applied_s, undone_s, w.result(), inject.counts(i), inject.usage(i));
  o.fired = inject.fired(i);
  o.no_effect |= o.fired == uint64_t{0}; // a fault point that never fired did nothing
  return o;
}

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// On a terminal, a line redrawn while the scenario runs: seconds of load elapsed
/// and left, faults applied and undone, requests the gateway has ended; fault events
/// print above it. Piped, only the events, as lines.
class live_progress {
public:
  live_progress(const topology& topo, const scenario& s, clock_type::time_point t0)
      : topo_(topo), total_s_(std::chrono::duration<double>(s.load.duration).count()), t0_(t0),
        line_("prfaas-chaos " + s.name, false), faults_(s.faults.size()) {}

  /// Sleeps until `at`, redrawing the line every half second.
  void wait_until(clock_type::time_point at) {
    while (clock_type::now() < at) {
      std::this_thread::sleep_until(std::min(at, clock_type::now() + 500ms));
      draw();
    }
  }
  void event(const std::string& what) {
    (what.rfind("applied", 0) == 0 ? applied_ : undone_) += 1;
    line_.print_above("prfaas-chaos: " + what);
    draw(true);
  }
  void done() { line_.finish(); }

private:
  void draw(bool now = false) {
    if (!line_.enabled())
      return;
    const double at = since(t0_);
    std::string ended = "?";
    if (auto m = get_metrics(topo_.place(topo_.gateway().node)))
      ended = std::to_string(static_cast<long>(proc::metric(*m, "prfaas_gateway_requests_total")));
    char text[200];
    std::snprintf(text, sizeof text,
                  "load %.0f/%.0f s  faults %zu applied, %zu undone of %zu  requests ended %s  "
                  "ETA %.0f s   ",
                  at, total_s_, applied_, undone_, faults_, ended.c_str(),
                  std::max(0.0, total_s_ - at));
    line_.show(text, now);
  }

  const topology& topo_;
  double total_s_;
  clock_type::time_point t0_;
  progress_line line_;
  size_t faults_, applied_ = 0, undone_ = 0;
};

/// Refuses a scenario this deployment cannot run (or skips one this host cannot).
void check_runnable(const scenario& s, const topology& topo) {
  check_nodes(s, topo.nodes());
  check_links(s, topo.deployment());
  check_points(s);
  for (auto& f : s.faults)
    if (auto why = unsupported(f, topo); !why.empty())
      throw skipped(why);
}

/// Fault `ended` was undone at `now`: a fault on some of the same nodes still recovering
/// from before it began could not be whole while it lasted, so its recovery counts from
/// now (watcher::held_until).
void hold_overlapping(const scenario& s, size_t ended, const deployment_config& d,
                      std::vector<std::unique_ptr<watcher>>& watchers, clock_type::time_point now) {
  const auto touched = nodes_touched(s.faults[ended], d);
  for (size_t j = 0; j < watchers.size(); ++j)
    if (j != ended && watchers[j] && overlap(touched, nodes_touched(s.faults[j], d)))
      watchers[j]->held_until(now, s.faults[ended].describe());
}

} // namespace

report run_scenario(const scenario& s, const environment& env, const run_options& opts) {
  topology topo{s, env};
  check_runnable(s, topo);

  report rep;
  rep.scenario = s.name;
  rep.topology = to_string(topo.kind());
  rep.note = topo.fallback_reason();
  rep.seed = s.load.seed;

  topo.start_all();
  std::string why;
  if (!topo.wait_healthy(90s, why))
    throw std::runtime_error("the deployment did not come up within 90 s: " + why);
  std::cerr << "prfaas-chaos: " << s.name << ": deployment up (" << rep.topology
            << "), load and faults starting" << std::endl;

  load_driver load{topo, s.load, env};
  injector inject{topo, opts.precise_blackhole};
  std::vector<std::unique_ptr<watcher>> watchers(s.faults.size());
  std::vector<double> applied_s(s.faults.size());
  std::vector<std::optional<double>> undone_s(s.faults.size());

  load.start();
  const auto t0 = clock_type::now();
  live_progress progress{topo, s, t0};
  auto events = timeline(s);
  for (size_t i = 0; i < events.size(); ++i) {
    const auto e = events[i];
    progress.wait_until(t0 + std::chrono::duration_cast<clock_type::duration>(seconds{e.at_s}));
    auto& f = s.faults[e.fault];
    if (e.apply) {
      watchers[e.fault] = std::make_unique<watcher>(topo, f);
      inject.apply(e.fault, f);
      watchers[e.fault]->applied(clock_type::now());
      applied_s[e.fault] = since(t0);
      keep_duration(events, i + 1, e.fault, applied_s[e.fault] - e.at_s);
    } else {
      inject.undo(e.fault);
      const auto now = clock_type::now();
      watchers[e.fault]->undone(now);
      undone_s[e.fault] = since(t0);
      hold_overlapping(s, e.fault, topo.deployment(), watchers, now);
    }
    progress.event((e.apply ? "applied " : "undone  ") + f.describe() + " at " +
                   std::to_string(since(t0)) + " s");
  }
  progress.wait_until(t0 + std::chrono::duration_cast<clock_type::duration>(s.load.duration));
  progress.done();

  // Every request ends within its deadline of being sent, the last sent at `duration`.
  const auto limit = s.load.duration + s.load.deadline + seconds{30} - seconds{since(t0)};
  if (!load.wait(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::max(limit, seconds{1}))))
    std::cerr << "prfaas-chaos: a load generator outlived every deadline and was interrupted"
              << std::endl;
  for (auto& w : watchers)
    if (w)
      w->finish(30s);

  // The deployment must be whole again: every node running (none died on its own) and
  // seeing all its peers up.
  rep.unexpected_exits = topo.unexpected_exits();
  std::string unhealthy;
  if (!topo.wait_healthy(20s, unhealthy))
    rep.unhealthy_at_end = unhealthy.empty() ? "not healthy within 20 s" : unhealthy;
  for (size_t i = 0; i < s.faults.size(); ++i)
    rep.faults.push_back(
        judge_fault(s.faults[i], i, applied_s[i], undone_s[i], *watchers[i], inject));
  const auto records = load.results();
  rep.requests = classify(records, s.load.deadline.count(), healed_at(rep.faults));
  // Quiescence: the load is over and every request ended; what is still held once
  // every lease and timer could have run out (a request's deadline, plus 5 s) is held
  // by mistake.
  const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(s.load.deadline) + 5s;
  proc::eventually([&] { return (rep.held = held(topo)).empty(); }, quiet, 250ms);
  read_counters(rep, topo);
  rep.tokens = check_tokens(topo.deployment(), records);
  return rep;
}

} // namespace prfaas::chaos

#pragma once

// Measures how long the deployment takes to notice one fault and to recover from it,
// polling the nodes' admin endpoints every 50 ms from a thread of its own:
//   kill, pause      the first peer whose /health shows the node suspect or down; back
//                    when every peer shows it up (after a kill: a new incarnation)
//   blackhole        the first `to` node that sees `from` suspect or down (and, both
//                    ways, `from` seeing a `to` node); back when all see each other up
//   link_down        prfaas_scheduler_link_up 0 on a scheduler node; back at 1 (a
//                    scheduler with links to several PrfaaS clusters: that link's own
//                    prfaas_scheduler_cluster_link_up, and the offloads it routed to the
//                    downed link's PrfaaS cluster from detection to the fault's end)
//   rate             prfaas_scheduler_bandwidth_scarce 1; back at 0

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "scenario.hpp"
#include "topology.hpp"

namespace prfaas::chaos {

using clock_type = std::chrono::steady_clock;

struct detection {
  std::optional<double> detected_s;  ///< after the fault was applied
  std::string detected_by;           ///< the observing node
  std::optional<double> recovered_s; ///< after the fault was undone (or `held_s` after)
  /// A later fault on some of the same nodes began before this one had recovered and
  /// ended `held_s` after this one's undo: recovery is counted from there (the
  /// deployment cannot be whole while it lasts). `held_by` describes it.
  std::optional<double> held_s;
  std::string held_by;
  /// link_down of one of several links: offloads routed across it between detection
  /// and the fault's end (none is the rule).
  std::optional<double> routed_across;
  /// The same: offloads each PrfaaS cluster linked to that PD cluster had been routed
  /// when the fault was applied, with its link's rate (bit/s).
  std::map<std::string, std::pair<double, double>> routes_before;
};

/// What a link carried while a `rate` fault held it (the busier direction), from tc.
struct link_usage {
  double bits_per_s = 0;
  uint64_t overlimits = 0; ///< times the token bucket ran dry (both ends)
};

class watcher {
public:
  /// Reads the baseline (incarnations) at once, then starts polling in the background;
  /// construct it just before applying the fault.
  watcher(const topology& t, const fault_spec& f);
  ~watcher();
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;

  /// The fault was applied / undone at `at`.
  void applied(clock_type::time_point at);
  void undone(clock_type::time_point at);
  /// Another fault, begun before this one recovered, ended at `at`: if this one is
  /// undone and not yet recovered, its recovery is counted from `at` (detection::held_s).
  void held_until(clock_type::time_point at, const std::string& by);
  /// Waits up to `limit` for the watch to finish (recovered, or nothing left to see),
  /// then stops it.
  void finish(std::chrono::milliseconds limit);
  detection result() const;

private:
  struct pair_watch {
    std::string observer, watched;
    uint64_t baseline = 0; ///< the watched node's incarnation before the fault
  };
  enum class verdict { unknown, healthy, faulty };

  void run();
  /// link_down of one of several links: that link's gauge, and the offloads so far.
  void watch_one_link();
  verdict poll_pair(const pair_watch& p) const;
  verdict poll_gauge(const std::string& node) const;

  const topology& topo_;
  fault_spec f_;
  std::vector<pair_watch> pairs_;   ///< kill, pause, blackhole
  std::vector<std::string> gauges_; ///< link_down, rate: scheduler nodes
  std::string metric_;
  std::vector<std::string> labels_; ///< of metric_'s series (one link's, among several)
  std::string across_;              ///< with labels_: the downed link's PrfaaS cluster
  std::optional<double> routes_at_detection_;
  /// The scheduler nodes' offloads to `across_` so far (prfaas_scheduler_cluster_routes_total).
  std::optional<double> routes_across() const;
  /// Per PrfaaS cluster linked to PD cluster `pd`: (offloads routed to it so far, its
  /// link's rate).
  std::map<std::string, std::pair<double, double>> routes_by_link(const std::string& pd) const;
  double faulty_value_ = 0, healthy_value_ = 1;

  mutable std::mutex mu_;
  std::optional<clock_type::time_point> applied_, undone_; ///< by mu_
  std::optional<clock_type::time_point> held_until_;       ///< by mu_
  detection result_;                                       ///< by mu_
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

} // namespace prfaas::chaos

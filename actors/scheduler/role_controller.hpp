#pragma once

// The long-term controller (paper §3.4.3, "convert PD nodes between prefill and
// decode to restore Eq. 7 and 8"). A *convertible* node is a PD-cluster
// node that hosts both a prefill worker and a decode worker of which exactly one takes
// work (the other is on standby). Every `interval` the controller compares the two PD
// stages' smoothed loads:
//   prefill load = mean pending prefill tokens per routable PD prefill worker,
//                  over `prefill_full_tokens` (a worker with that much waiting is full);
//   decode load  = mean occupancy / max batch over routable decode workers.
// When one stage is at or above `high` while the other is at or below `low` — the
// stages are out of balance, Eq. 8 — one convertible node moves toward the loaded
// stage: its current role stops taking new work (drain), and once a fresh load
// report shows it empty, the other role takes work. One conversion at a time, then a
// `cooldown`; a drain that does not finish within `drain_timeout` is undone.
// The workers never move; only which of the node's two roles is routed to changes.
//
// With online re-planning (replanner.hpp) the plan sets a target count of PD prefill
// instances; while one is set, conversions move toward it and the load thresholds are
// not consulted. Toward a target up to `parallel` nodes drain at once (a plan several
// nodes away would otherwise wait one drain and one cooldown per node; the cooldown is
// still kept before starting more once conversions completed).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/policy.hpp"

namespace prfaas::serving {

class role_controller {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::nanoseconds;

  struct settings {
    duration interval{0}; ///< 0 = off (the scheduler's convert_interval turns it on)
    duration cooldown = std::chrono::seconds(60);
    duration drain_timeout = std::chrono::seconds(120);
    double high = 0.8;
    double low = 0.4;
    double prefill_full_tokens = 65536;
    double smoothing = 0.5;   ///< EWMA weight of the newest load sample
    uint32_t min_prefill = 1; ///< PD prefill nodes never fewer than this
    uint32_t min_decode = 1;
    uint32_t parallel = 1; ///< conversions draining at once toward a target (load rule: 1)
  };

  /// What changed in one tick (for logs and metrics).
  struct event {
    std::string node;
    std::string to;    ///< "prefill" | "decode"
    std::string phase; ///< "draining" | "converted" | "aborted"
  };

  /// Finds the convertible nodes in `v` (their standby role already disabled).
  role_controller(settings s, const cluster_view& v);

  /// Feeds the current view; may disable or enable workers in it.
  std::vector<event> tick(time_point now, cluster_view& v);

  /// The plan's PD prefill instances; nullopt = follow the load thresholds.
  void set_target(std::optional<uint32_t> prefill) { target_ = prefill; }
  std::optional<uint32_t> target() const { return target_; }
  /// The fewest and most PD prefill instances conversions can reach from `v` (the
  /// routable PD prefill workers minus / plus the convertible nodes now serving the
  /// other role), within the minimums of both roles.
  std::pair<uint32_t, uint32_t> prefill_range(const cluster_view& v) const;

  size_t convertible() const { return nodes_.size(); }
  uint64_t conversions() const { return conversions_; }
  double prefill_load() const { return load_p_; }
  double decode_load() const { return load_d_; }
  /// Routable PD prefill and decode workers on convertible nodes plus the others.
  static std::pair<uint32_t, uint32_t> pd_roles(const cluster_view& v);

private:
  struct dual {
    std::string node;
    size_t prefill = 0; ///< index into cluster_view::prefill
    size_t decode = 0;  ///< index into cluster_view::decode
  };
  struct conversion {
    size_t node = 0; ///< index into nodes_
    bool to_prefill = false;
    uint64_t reports_at = 0; ///< the draining worker's report count when it was disabled
    time_point since{};
  };

  void measure(const cluster_view& v);
  std::optional<event> start(time_point now, cluster_view& v, bool to_prefill);
  /// Whether conversion `c` finished (converted or aborted): the event, else nullopt.
  std::optional<event> progress(time_point now, cluster_view& v, const conversion& c);
  /// Starts the conversions the target or the loads ask for.
  void begin(time_point now, cluster_view& v, std::vector<event>& out);

  settings s_;
  std::vector<dual> nodes_;
  std::vector<conversion> active_;
  std::optional<uint32_t> target_;
  time_point last_tick_{};
  time_point last_change_{};
  bool started_ = false;
  double load_p_ = 0, load_d_ = 0;
  uint64_t conversions_ = 0;
};

} // namespace prfaas::serving

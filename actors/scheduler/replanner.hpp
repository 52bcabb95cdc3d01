#pragma once

// The planning half of the long-term controller (paper §3.4.3): every `interval`, the
// throughput model of Eq. 3–8 (planner/) runs on what the scheduler has observed, and
// the planned threshold t and the PD cluster's P/D split move toward its optimum.
//
// What the model is fed, all from the recent `window`:
//   * lengths: the uncached length of every routed request (after prefix matching:
//     what a prefill computes), as an empirical distribution;
//   * prefill speed per side: each side's profile (the deployment's, Table 5 style),
//     its times scaled by measured over profiled time of the same prefills — each
//     routable worker reports its last prefills (computed tokens, engine seconds), and
//     the side's scale is their seconds summed over the profile's seconds for the
//     same lengths, so a slower-than-profiled H20 makes every PD time longer (a
//     prefill has a fixed cost: a pace, tokens over seconds, depends on which lengths
//     ran last, and two paces over different prompts compare those, not the speeds);
//   * link: the usable bandwidth (measured throughput while the link is backed up,
//     else its configured rate), which Eq. 3's Θ_link turns into the hard bound of
//     Eq. 2 on offloaded KV;
//   * instances: the routable PrfaaS prefill workers, and the PD instances with the
//     range of prefill counts the convertible nodes allow;
//   * decode: the PD profile's decode model at the requests' mean output length.
//
// Moves, with hysteresis and a bounded rate:
//   * t: when the plan's t differs from the planned one by more than `hysteresis`
//     (a share) and its prefill capacity (Eq. 6 before decode caps it: what the t
//     search maximises) beats the planned t's by more than `t_gain`, the planned t
//     moves toward it by at most a factor `max_step`;
//   * split: when the plan's PD prefill count differs and its predicted Λ beats the
//     best Λ at the committed split by more than `split_gain` (a conversion costs a
//     drain), the target split changes at once; for a smaller gain, above `t_gain`, it
//     changes when `split_patience` re-plans in a row want that same split. Going back
//     the way the last change came within `split_reverse_hold` of it always takes that
//     patience (no flapping on a noisy window), unless the lengths shifted since. The
//     role controller converts toward the target.
// Each re-plan returns what it decided and why, with the predicted Λ at the current
// operating point and at the plan's, for logs and metrics.
//
// With links to several PrfaaS clusters (cluster_view::links), the model is the M × N
// planner's LP (planner/multi.hpp) with this PD cluster alone and every PrfaaS cluster
// it links to: each link at its usable bandwidth, each cluster at its routable workers
// scaled by this PD cluster's share of them (a PrfaaS cluster serving several PD
// clusters is not all this one's), the same t and split searches and the same moves.
// With one link it is the one-cluster model (Eq. 3–8) exactly as before.
//
// Not modelled: queueing (the planner is a capacity model), prefix-cache placement
// (the lengths are already uncached), and the decode speed is the profile's, not a
// measurement (decode workers do not report their step time).

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "prfaas/engine/profile.hpp"
#include "prfaas/planner/model.hpp"
#include "scheduler/policy.hpp"

namespace prfaas::serving {

/// The model a re-plan searches (replanner.cpp): one link's, or the LP of several.
class plan_space;

class replanner {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::nanoseconds;

  struct settings {
    duration interval{0}; ///< 0 = off (the scheduler's replan_interval turns it on)
    duration window = std::chrono::seconds(120);
    /// A shift of the lengths restarts the window: when the mean log length of the last
    /// interval differs from the older samples' by more than this many standard errors
    /// (Welch), the older samples are dropped (0 = never). A long window keeps the plan
    /// steady; this keeps it quick after a real change.
    double shift_z = 4;
    double hysteresis = 0.1; ///< the planned t holds while within this share of the plan's
    double max_step = 4;     ///< t moves by at most this factor per re-plan
    /// ... and only when the plan's prefill capacity beats the planned t's by this share
    /// (a flat optimum and a noisy window must not keep t moving)
    double t_gain = 0.02;
    double split_gain = 0.1; ///< a new split must predict this much more Λ (a share)...
    /// ... or more than t_gain on this many re-plans in a row wanting that same split
    /// (0 = only split_gain counts)
    uint32_t split_patience = 3;
    /// A split that goes back the way the last change came, within this long of that
    /// change, needs `split_patience` re-plans in a row whatever its gain (0 = no hold),
    /// unless the lengths shifted since: a conversion drains a node for tens of seconds,
    /// and one re-plan's noisy window calling it back costs two drains for nothing.
    duration split_reverse_hold = std::chrono::seconds(60);
    size_t min_samples = 20; ///< fewer routed requests in the window: no re-plan
    size_t max_samples = 8192;
    uint64_t min_t = 0, max_t = 1u << 20; ///< the planned t stays within these
    double link_rate_bps = 0;             ///< the configured link rate, until a monitor reports one
    /// With links to several PrfaaS clusters, per PrfaaS cluster: its link's configured
    /// rate (until a monitor reports one) and this PD cluster's share of its workers.
    struct prfaas_link {
      double rate_bps = 0;
      double share = 1; ///< 0..1: see long_term.cpp (PD clusters' `share` over a cluster)
    };
    std::map<std::string, prfaas_link> links;
    /// The scheduler splits offloads over the links by their rates (`link_split: rate`):
    /// the plan's flows do too.
    bool split_by_rate = false;
  };

  /// The profiles of the two sides (prefill timing on both, a decode model on the PD one).
  struct profiles {
    engine::profile prfaas, pd;
  };

  /// The PD cluster as the role controller leaves it: instances taking work, and how
  /// many PD prefill instances the convertible nodes allow.
  struct pd_instances {
    uint32_t prefill = 0, decode = 0;
    uint32_t min_prefill = 0, max_prefill = 0; ///< equal without convertible nodes
  };

  /// One re-plan.
  struct decision {
    /// "moved" (t or split changed), "held" (within hysteresis), "few_samples",
    /// "no_link" (the link is down or its rate unknown), "no_workers" (a side has no
    /// routable worker). A side without a measured pace yet runs at its profile's.
    const char* reason = "";
    uint64_t t_before = 0, t_after = 0; ///< the planned t
    uint64_t t_plan = 0;                ///< the plan's optimum (t_after moves toward it)
    uint32_t prefill_before = 0, prefill_after = 0; ///< PD prefill instances (target)
    uint32_t pd_total = 0;
    double lambda_now = 0;  ///< predicted Λ (req/s) at the operating point before the move
    double lambda_plan = 0; ///< ... at the plan's optimum
    std::string binding;    ///< the plan's binding constraint (Eq. 6)
    double usable_gbps = 0, prfaas_scale = 1, pd_scale = 1;
    size_t samples = 0;
    bool window_restarted = false; ///< a shift of the lengths dropped the older samples
  };

  replanner(settings s, profiles p, uint64_t planned_t);

  /// A routed request: its uncached length and its output budget (max tokens).
  void observe(time_point now, uint64_t uncached, uint32_t output_tokens);

  /// Re-plans when due (else nullopt).
  std::optional<decision> tick(time_point now, const cluster_view& v, const pd_instances& pd);

  uint64_t planned() const { return planned_; }
  /// The PD prefill instances the plan wants; nullopt before a plan chose a split.
  std::optional<uint32_t> target_prefill() const { return target_prefill_; }
  const settings& config() const { return s_; }

  /// The side's time multiplier: the seconds of the routable workers' last reported
  /// prefills over the profile's seconds for the same lengths (1 when none is known).
  /// Exposed for tests.
  double scale(bool prfaas_side, const cluster_view& v) const;

private:
  struct sample {
    time_point at;
    uint64_t uncached;
    uint32_t output;
  };
  void expire(time_point now);
  /// Drops the samples before the last interval when the lengths shifted; whether it did.
  bool restart_on_shift(time_point now);
  std::optional<decision> measure(const cluster_view& v, const pd_instances& pd,
                                  planner::case_inputs& in, decision& d);
  void move(time_point now, const plan_space& m, const pd_instances& pd, decision& d);
  /// Whether the best split (`best_prefill` PD prefill instances, predicting `best_lambda`)
  /// replaces the committed one (keeps the streak; `shifted`: the window restarted).
  bool wants_split(time_point now, bool shifted, uint32_t best_prefill, double best_lambda,
                   double committed_lambda, uint32_t committed);

  settings s_;
  profiles p_;
  std::deque<sample> samples_;
  uint64_t planned_;
  std::optional<uint32_t> target_prefill_;
  /// The split the last re-plans preferred to the committed one, and how many in a row.
  uint32_t streak_prefill_ = 0, streak_ = 0;
  /// The last change of the target split: when, and the target it left.
  std::optional<time_point> split_moved_at_;
  uint32_t split_moved_from_ = 0;
  /// The lengths shifted (the window restarted) since that change.
  bool shifted_since_move_ = false;
  time_point last_{};
  bool started_ = false;
};

} // namespace prfaas::serving

#pragma once

// The short-term controller of the prfaas policy (paper §3.4.3). It moves
// the offload threshold t on two signals:
//
// Balance (Eq. 7 as feedback). When both clusters' prefill queues are known — pending
// tokens over the workers' measured pace, and on the PrfaaS side at least the egress
// backlog's drain time — t follows the side that is behind: the PD cluster's wait
// longer than `balance_ratio` × the PrfaaS side's (and by more than `balance_slack`)
// divides t by `balance_step` (offload more); the PrfaaS side's wait (its queue or the
// link's) longer in the same way multiplies it (offload less). A slow link thus raises
// t through the PrfaaS side's wait, and an overloaded PD cluster lowers it again:
// neither side is starved for the other. With both waits within `balance_slack`, t
// returns toward the planned one (one halving or doubling per retune interval).
//
// Link fit (Eq. 2 on the observed traffic): while PrfaaS egress is *scarce*, t is
// re-searched so that what the requests of the recent past would send over the link
// fits in what the link delivers now — the bandwidth term of Eq. 3: over the requests
// of the last `window` (uncached lengths l),
//     egress(t) = Σ_{l > t} kv_bytes(l) · 8 / window_span
// and t is the smallest observed length with egress(t) ≤ target × usable bandwidth.
// Usable bandwidth is the measured throughput while the link is backed up (it is the
// bottleneck, e.g. a `tc tbf` rate below the configured one), else its capacity.
// Entering a scarce episode, t jumps toward the fit at once, whether or not balancing
// is on (a sudden rate cut is too far for balancing's steps) — but only as far as the
// PD cluster can absorb: the recent requests at or below the new t must need at most
// `absorb_share` of the PD cluster's measured prefill pace (unknown pace: no jump).
// After that the fit runs only while balancing is calm or blind, and within the
// episode it only raises t. Balancing may lower t below it again: the link's backlog
// is a queue like the PD cluster's, and with both behind, splitting the wait beats
// holding the bound (docs/simulation.md, the bandwidth step).
//
// No flapping: t moves at most once per `retune_interval`, balancing has a dead band
// (ratio and slack) and acts only on an imbalance that lasted a retune interval, and
// the scarce/abundant switch has hysteresis (bandwidth_mode).
// t never leaves [min, max]. A PrfaaS queue that is full while the link is idle is not
// a bandwidth problem: the policy calls it scarce for cache judgement but feeds the
// link fit "abundant"; balancing sees it as the PrfaaS side's wait.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace prfaas::serving {

class threshold_controller {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::nanoseconds;

  struct settings {
    uint64_t planned = 4096;         ///< t when bandwidth is abundant (the planner's)
    uint64_t min = 0;                ///< balancing never lowers t below this
    uint64_t max = 1u << 20;         ///< t never rises above this
    double target_utilisation = 0.8; ///< of the usable bandwidth
    duration window = std::chrono::seconds(30);
    duration retune_interval = std::chrono::seconds(2);
    size_t max_samples = 8192;    ///< oldest samples go first beyond this
    double balance_ratio = 1.5;   ///< one side's wait over the other's to act; 0 = off
    double balance_slack_s = 2.0; ///< ... and by more than this many seconds
    double balance_step = 1.25;   ///< t is divided or multiplied by this per retune
    double absorb_share = 0.8;    ///< of the PD pace a jump to the link fit may fill
  };

  /// How long new prefill work would wait on each side now (seconds; -1 = unknown).
  struct queue_signals {
    double pd_seconds = -1; ///< the PD cluster's prefill queue
    double prfaas_seconds =
        -1; ///< the PrfaaS cluster's: its queue or the egress backlog, the longer
    double pd_pace_tokens_per_s = 0; ///< the PD cluster's summed prefill pace; 0 = unknown
  };

  /// What the link looks like now (from the link monitors).
  struct link_signals {
    double capacity_bps = 0;   ///< configured rate; 0 = unknown
    double throughput_bps = 0; ///< measured, acknowledged
    uint64_t backlog_bytes = 0;
  };

  using kv_bytes_fn = std::function<double(uint64_t tokens)>;

  threshold_controller(settings s, kv_bytes_fn kv_bytes);

  /// One routed request's uncached length (what is compared with t).
  void observe(time_point now, uint64_t uncached_tokens);

  /// Feeds the mode, link and queues; moves t when due. Returns the current t.
  uint64_t update(time_point now, bool scarce, const link_signals& link,
                  const queue_signals& queues);
  /// The same with neither cluster's queue known: the link fit alone.
  uint64_t update(time_point now, bool scarce, const link_signals& link);

  /// The long-term controller moved the planned t: the planned point becomes
  /// `planned` (within [min, max]) and t moves by the same factor, so whatever offset
  /// balancing or the link fit had set is kept relative to the new plan.
  void replan(time_point now, uint64_t planned);

  uint64_t threshold() const { return t_; }
  /// Times t was re-searched or moved (a rare path worth a metric).
  uint64_t retunes() const { return retunes_; }
  /// The side balancing last found behind: "pd", "prfaas" or "" (balanced or unknown).
  const char* behind() const;
  /// Why t last moved: "pd_behind" (lowered: the PD side's wait was the longer),
  /// "prfaas_behind" (raised: the PrfaaS side's), "link_fit" (re-searched so the KV fits
  /// the scarce link), "back_to_plan" (toward the planned t once both keep up); "" before
  /// the first move; "replan" when the long-term controller moved the plan.
  const char* last_reason() const { return reason_; }
  const settings& config() const { return s_; }

  /// The smallest threshold in [planned, max] whose egress over `lengths` (uncached
  /// lengths seen over `span_seconds`) fits in `budget_bps`; `max` when none does.
  static uint64_t search(std::vector<uint64_t> lengths, double span_seconds, double budget_bps,
                         const kv_bytes_fn& kv_bytes, uint64_t planned, uint64_t max);

private:
  void expire(time_point now);
  enum class balance_state {
    unknown, ///< a side's queue is not known (or balancing is off): the link fit decides
    acted,   ///< a side is behind (t moved when due), or both are, about equally (t holds)
    calm,    ///< both sides keep up: the link fit decides
  };
  balance_state balance(time_point now, bool due, const queue_signals& q);
  void set(time_point now, uint64_t t, const char* reason);
  /// Re-searches the link bound on the recent traffic and raises t to it (no higher
  /// than `cap`); whether t moved.
  bool fit_link(time_point now, const link_signals& link, uint64_t cap = UINT64_MAX);
  /// The highest t the PD cluster can take at `pace` tokens/s: the recent requests at or
  /// below it need at most absorb_share of the pace. t itself when it cannot take more.
  uint64_t absorbable(time_point now, double pace) const;
  /// The span the samples cover, at least a second.
  double span_seconds(time_point now) const;
  double step() const { return std::max(s_.balance_step, 1.01); }
  /// t one balancing step up.
  uint64_t raised() const;

  settings s_;
  kv_bytes_fn kv_bytes_;
  std::deque<std::pair<time_point, uint64_t>> samples_; ///< (arrival, uncached length)
  uint64_t t_;
  bool scarce_ = false;
  time_point last_retune_{};
  uint64_t retunes_ = 0;
  enum class side { none, pd, prfaas };
  side behind_ = side::none;
  time_point behind_since_{}; ///< since when behind_ has been behind
  const char* reason_ = "";   ///< why t last moved (last_reason())
};

} // namespace prfaas::serving

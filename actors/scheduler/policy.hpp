#pragma once

// Routing policies: the decision part of the scheduler as plain C++ (no actors),
// chosen by name in the deployment file and registered like actor types:
//
//   - { type: scheduler, name: sched, policy: threshold, threshold: 4096 }
//
// The scheduler actor keeps the cluster view (workers, liveness, load, link state)
// current and asks its policy for each request. A new policy is a class deriving
// from routing_policy plus one PRFAAS_REGISTER_POLICY line; nothing else changes.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prfaas/messages/remote_message.hpp"
#include "prfaas/runtime/actor_registry.hpp"

namespace prfaas::serving {

/// One worker as the scheduler sees it.
struct worker_view {
  address addr;
  std::string cluster;
  bool prfaas = false; ///< in a prefill-only (PrfaaS) cluster
  bool up = true;      ///< its node is up (failure detector)
  /// Takes new work: false while its node serves the other role, or drains toward it
  /// (the long-term controller's P/D conversion).
  bool enabled = true;
  /// Its engine is still being built (last report; a real model takes seconds to load).
  bool starting = false;
  uint32_t queue = 0;           ///< last reported queue depth
  uint32_t active = 0;          ///< last reported active work
  uint32_t capacity = 1;        ///< decode: max batch; prefill: max queue
  uint64_t queued_tokens = 0;   ///< prefill: tokens waiting (last report)
  uint32_t assigned = 0;        ///< routed here that the last report may not include
  uint64_t assigned_tokens = 0; ///< prefill tokens of those
  uint64_t reports = 0;         ///< load reports received (a fresh one tells "drained")
  double tokens_per_s = 0;      ///< prefill: the engine's measured pace; 0 = not yet known
  /// prefill: its last prefills, (computed tokens, engine seconds), oldest first (last report
  /// that had any).
  std::vector<std::pair<uint32_t, double>> recent_prefills;

  using time_point = std::chrono::steady_clock::time_point;
  /// A request routed here: when, and its prefill tokens.
  struct route_booked {
    time_point at;
    uint64_t tokens = 0;
  };
  /// Routes not yet known to be in a report (oldest first).
  std::deque<route_booked> booked;

  /// Up and taking new work.
  bool routable() const { return up && enabled && !starting; }

  /// Counts a request routed here at `now` until a report shows it.
  void book(time_point now, uint64_t tokens) {
    booked.push_back({now, tokens});
    ++assigned;
    assigned_tokens += tokens;
  }
  /// A load report arrived, answering a poll sent at `polled`. The routes booked
  /// before polled - grace had reached the worker before it answered (the order
  /// travels from the gateway, the poll from here: grace bounds how much longer the
  /// order's way can be); the later ones may still be on their way, and stay counted.
  /// Forgetting them made a just-chosen worker look idle, and the next request queue
  /// behind it.
  void settle(time_point polled, std::chrono::nanoseconds grace) {
    while (!booked.empty() && booked.front().at < polled - grace)
      booked.pop_front();
    assigned = static_cast<uint32_t>(booked.size());
    assigned_tokens = 0;
    for (auto& b : booked)
      assigned_tokens += b.tokens;
  }

  /// Estimated pending prefill work in tokens (report + what we sent since).
  uint64_t pending_tokens() const { return queued_tokens + assigned_tokens; }
  /// Estimated decode occupancy (sequences).
  uint32_t occupancy() const { return queue + active + assigned; }
};

/// One cross-cluster link from the scheduler's PD cluster to one PrfaaS cluster, as its
/// link monitors report it (the PrfaaS side measures the egress).
struct link_view {
  std::string cluster;       ///< the PrfaaS cluster at its far end
  bool up = true;            ///< no monitor of this pair reports it down
  double utilisation = 0;    ///< PrfaaS egress over it, 0..1
  double capacity_bps = 0;   ///< its rate (0 = not measured yet)
  double throughput_bps = 0; ///< measured egress
  uint64_t backlog_bytes = 0;
  double queue_seconds = 0; ///< backlog drain time, as seen in two reports in a row

  /// Eq. 2 per link: its egress pressure (utilisation plus the backlog's drain time as a
  /// share of `horizon`) is above 1: it carries more than its budget.
  bool over_budget(std::chrono::nanoseconds horizon) const {
    const double h = std::chrono::duration<double>(horizon).count();
    return utilisation + (h > 0 ? queue_seconds / h : 0.0) > 1.0;
  }
};

struct cluster_view {
  std::vector<worker_view> prefill;
  std::vector<worker_view> decode;
  /// One entry per PrfaaS cluster this PD cluster has a link to. With two or more, each
  /// PrfaaS worker is reachable only over its cluster's link (`offload_open`), and the
  /// `link_*` fields below are their aggregate (summed rates, the best link's drain
  /// time); with one (or none: views built by hand) the `link_*` fields are the link.
  std::vector<link_view> links;
  /// Over-budget horizon for `offload_open` (the policy's backlog horizon).
  std::chrono::nanoseconds link_budget_horizon = std::chrono::seconds(1);
  bool link_up = true;             ///< no link monitor reports the cross-cluster link down
  double link_utilisation = 0;     ///< PrfaaS egress over the link, 0..1 (link monitors)
  double link_capacity_bps = 0;    ///< configured link rate (0 = unknown)
  double link_throughput_bps = 0;  ///< measured PrfaaS egress
  uint64_t link_backlog_bytes = 0; ///< PrfaaS egress waiting for the link
  /// When the view was taken (the actor clock: virtual time in simulation).
  std::chrono::steady_clock::time_point now{};
  /// KVCache bytes a prompt of this many uncached tokens ships (the model's); unset =
  /// unknown, and policies that need it keep their configured threshold.
  std::function<double(uint64_t)> kv_bytes;

  /// How long the egress backlog takes to drain at the rate the link delivers now
  /// (backlog / measured throughput), as seen in two link reports in a row, so the
  /// first moments of a burst on an idle link do not count.
  double link_queue_seconds = 0;

  /// Egress pressure, 0..: utilisation of the configured rate, plus the queueing
  /// delay as a share of `horizon` — a link that is backed up is under pressure even
  /// when it delivers far below its configured rate (a `tbf` cut shows up here, not
  /// in the utilisation).
  double link_pressure(std::chrono::nanoseconds horizon) const {
    double p = link_utilisation;
    if (horizon.count() > 0)
      p += link_queue_seconds / std::chrono::duration<double>(horizon).count();
    return p;
  }

  /// How long one side's routable prefill workers (the PrfaaS cluster's or the PD
  /// cluster's) need for the work they hold: their pending tokens over their summed
  /// measured pace. A worker that has not measured its pace yet counts at the side's
  /// mean. 0 for a side with nothing pending; -1 when work is pending but no worker of
  /// the side has a pace yet, or the side has no routable worker.
  double prefill_drain_seconds(bool prfaas_side) const {
    uint64_t pending = 0;
    double rate = 0;
    size_t n = 0, known = 0;
    for (auto& w : prefill)
      if (w.prfaas == prfaas_side && w.routable()) {
        pending += w.pending_tokens();
        ++n;
        if (w.tokens_per_s > 0) {
          rate += w.tokens_per_s;
          ++known;
        }
      }
    if (n == 0)
      return -1;
    if (pending == 0)
      return 0;
    if (known == 0)
      return -1;
    return static_cast<double>(pending) /
           (rate * static_cast<double>(n) / static_cast<double>(known));
  }

  /// One side's summed measured prefill pace in tokens/s (a worker without a pace yet
  /// counts at the side's mean); 0 when no routable worker of the side has one.
  double prefill_pace(bool prfaas_side) const {
    double rate = 0;
    size_t n = 0, known = 0;
    for (auto& w : prefill)
      if (w.prfaas == prfaas_side && w.routable()) {
        ++n;
        if (w.tokens_per_s > 0) {
          rate += w.tokens_per_s;
          ++known;
        }
      }
    return known == 0 ? 0 : rate * static_cast<double>(n) / static_cast<double>(known);
  }

  /// Prefill work waiting in the PrfaaS cluster, in tokens (reports + routed since);
  /// with `cluster` non-empty, in that PrfaaS cluster only.
  uint64_t prfaas_pending_tokens(const std::string& cluster = {}) const {
    uint64_t sum = 0;
    for (auto& w : prefill)
      if (w.prfaas && w.routable() && (cluster.empty() || w.cluster == cluster))
        sum += w.pending_tokens();
    return sum;
  }

  /// The link a PrfaaS worker is reached over when there is a choice of links; nullptr
  /// with one link or none (then the `link_*` fields are the link) or for a PD worker.
  const link_view* link_of(const worker_view& w) const {
    if (!w.prfaas || links.size() < 2)
      return nullptr;
    for (auto& l : links)
      if (l.cluster == w.cluster)
        return &l;
    return nullptr;
  }

  /// A worker new work may be placed on as far as the links go: every PD worker; a
  /// PrfaaS worker unless, with several links, its link is down, or over budget while
  /// another up link is not (Eq. 2 per link: an over-budget link takes nothing while
  /// there is room elsewhere; when all are over, the threshold answers, as with one).
  bool offload_open(const worker_view& w) const;

  /// Fills the `link_*` aggregate from `links` (see `links`).
  void aggregate_links();
};

struct route_input {
  uint32_t prompt_tokens = 0;
  std::span<const uint64_t> block_ids;
  /// Prompt tokens already cached, by worker ("node/actor") or by node (from the KV
  /// directory's prefix match); workers not listed hold none.
  std::map<std::string, uint32_t> cached_by_node;
  std::vector<std::string> exclude_nodes;        ///< prefill nodes that failed this request
  bool local_only = false;                       ///< prefill in the PD cluster only
  std::string decode_node, decode_actor;         ///< keep this decode worker (failover)
  std::vector<std::string> exclude_decode_nodes; ///< decode nodes that failed it (resume)
};

/// The cached prefix a worker holds (0 if none): looked up by its address
/// ("node/actor"), then by its node name.
inline uint32_t cached_on(const route_input& in, const worker_view& w) {
  auto it = in.cached_by_node.find(w.addr.to_string());
  if (it == in.cached_by_node.end())
    it = in.cached_by_node.find(w.addr.node);
  return it == in.cached_by_node.end() ? 0 : std::min(it->second, in.prompt_tokens);
}

struct route_choice {
  int prefill = -1;  ///< index into cluster_view::prefill; -1 = none
  int decode = -1;   ///< index into cluster_view::decode; -1 = none
  std::string route; ///< "prfaas" | "pd"
  uint32_t uncached_tokens = 0;
  uint64_t threshold = 0;
  std::string mode; ///< prfaas policy: "scarce" | "abundant"
  /// prfaas policy: why its controller last moved t (threshold_controller::last_reason).
  std::string threshold_reason;
  /// prfaas policy: what placed the prefill, "threshold" (t) or "cost" (expected time).
  std::string basis;
  /// The best cache sits in the other cluster and bandwidth allows moving it there
  /// (abundant mode): the prefill node should pull it first.
  bool move_cache = false;
  int cache_source = -1; ///< with move_cache: the worker (index into prefill) to pull from
  std::string why_not;   ///< when no route: what was missing
};

class routing_policy {
public:
  virtual ~routing_policy() = default;
  virtual std::string name() const = 0;
  virtual route_choice decide(const route_input& in, const cluster_view& view) = 0;
  /// The long-term controller re-planned the offload threshold: a policy with one takes
  /// it as its planned operating point. False: this policy has no threshold.
  virtual bool replan(std::chrono::steady_clock::time_point /*now*/, uint64_t /*planned*/) {
    return false;
  }
};

using policy_factory = std::function<std::unique_ptr<routing_policy>(const actor_params&)>;

/// Name → factory. Policies read their knobs from the scheduler's parameters.
class policy_registry {
public:
  static policy_registry& instance();
  bool add(const std::string& name, policy_factory f);
  std::unique_ptr<routing_policy> make(const std::string& name, const actor_params& p) const;
  std::vector<std::string> names() const;

private:
  std::map<std::string, policy_factory> factories_;
};

/// Helpers shared by policies: the least-loaded eligible worker, or -1.
int least_loaded_prefill(const cluster_view& v, bool prfaas_side,
                         const std::vector<std::string>& exclude);
/// `node`/`actor` non-empty: that worker only; workers on `exclude` nodes never.
int least_loaded_decode(const cluster_view& v, const std::string& node, const std::string& actor,
                        const std::vector<std::string>& exclude = {});

} // namespace prfaas::serving

#define PRFAAS_REGISTER_POLICY(name, factory)                                                      \
  static const bool PRFAAS_PP_CAT(prfaas_policy_, __COUNTER__) =                                   \
      ::prfaas::serving::policy_registry::instance().add(name, factory)

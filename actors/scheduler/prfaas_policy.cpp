#include "scheduler/prfaas_policy.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "scheduler/threshold_controller.hpp"

namespace prfaas::serving {

namespace {

bool excluded(const route_input& in, const std::string& node) {
  return std::find(in.exclude_nodes.begin(), in.exclude_nodes.end(), node) !=
         in.exclude_nodes.end();
}

/// May take this request's prefill: routable, not failed it, its link (if a PrfaaS
/// worker among several links) open.
bool eligible(const cluster_view& v, const route_input& in, const worker_view& w) {
  return w.routable() && !excluded(in, w.addr.node) && v.offload_open(w);
}

/// The longest cached prefix on an eligible worker of one side.
uint32_t best_cache(const cluster_view& v, const route_input& in, bool prfaas_side) {
  uint32_t best = 0;
  for (auto& w : v.prefill)
    if (w.prfaas == prfaas_side && eligible(v, in, w))
      best = std::max(best, cached_on(in, w));
  return best;
}

bool has_side(const cluster_view& v, const route_input& in, bool prfaas_side) {
  for (auto& w : v.prefill)
    if (w.prfaas == prfaas_side && eligible(v, in, w))
      return true;
  return false;
}

double number_or(const actor_params& p, const char* key, double fallback) {
  return p.has(key) ? p.number(key) : fallback;
}

int64_t integer_or(const actor_params& p, const char* key, int64_t fallback) {
  return p.has(key) ? p.integer(key) : fallback;
}

/// Fills decode, or says why there is none; false when there is none.
bool pick_decode(route_choice& c, const route_input& in, const cluster_view& v) {
  c.decode = least_loaded_decode(v, in.decode_node, in.decode_actor, in.exclude_decode_nodes);
  if (c.decode < 0)
    c.why_not = in.decode_node.empty()
                    ? "no decode worker is up and ready"
                    : "decode worker " + in.decode_node + "/" + in.decode_actor + " is not up";
  return c.decode >= 0;
}

/// The mean measured pace of one side's routable prefill workers; 0 if none has one.
double side_pace(const cluster_view& v, bool prfaas_side) {
  double sum = 0;
  size_t n = 0;
  for (auto& w : v.prefill)
    if (w.routable() && w.prfaas == prfaas_side && w.tokens_per_s > 0) {
      sum += w.tokens_per_s;
      ++n;
    }
  return n ? sum / static_cast<double>(n) : 0;
}

} // namespace

double expected_ready_seconds(const cluster_view& v, const route_input& in, size_t i) {
  auto& w = v.prefill[i];
  const double pace = w.tokens_per_s > 0 ? w.tokens_per_s : side_pace(v, w.prfaas);
  if (pace <= 0)
    return -1;
  const double start = static_cast<double>(w.pending_tokens()) / pace;
  const double computed = start + static_cast<double>(in.prompt_tokens - cached_on(in, w)) / pace;
  if (!w.prfaas)
    return computed;
  // Its link: its own among several, else the one link (the view's fields).
  const link_view* l = v.link_of(w);
  const double capacity = l ? l->capacity_bps : v.link_capacity_bps;
  const double utilisation = l ? l->utilisation : v.link_utilisation;
  const double queue_s = l ? l->queue_seconds : v.link_queue_seconds;
  const double bw = capacity > 0 ? capacity * std::max(0.1, 1.0 - utilisation)
                                 : (l ? l->throughput_bps : v.link_throughput_bps);
  if (!v.kv_bytes || bw <= 0)
    return computed + queue_s;
  // The KV streams out layer by layer while the prefill runs, once the link has carried
  // what is ahead of it: the bytes already on the wire, and the KV of every prefill
  // queued on the PrfaaS side behind this link (it crosses the same link, first). Ready
  // when both the compute and the transfer are done.
  const uint64_t queued = l ? v.prfaas_pending_tokens(w.cluster) : v.prfaas_pending_tokens();
  const double ahead = queue_s + (queued > 0 ? v.kv_bytes(queued) * 8.0 / bw : 0.0);
  const double shipped = std::max(start, ahead) + v.kv_bytes(in.prompt_tokens) * 8.0 / bw;
  return std::max(computed, shipped);
}

int fastest_prefill(const cluster_view& v, const route_input& in, bool allow_prfaas,
                    bool only_prfaas) {
  int best = -1;
  double best_eta = 0;
  for (size_t i = 0; i < v.prefill.size(); ++i) {
    auto& w = v.prefill[i];
    if ((w.prfaas && !allow_prfaas) || (!w.prfaas && only_prfaas) || !eligible(v, in, w))
      continue;
    const double eta = expected_ready_seconds(v, in, i);
    if (eta < 0)
      return -1; // a side without a measured pace: no basis to compare
    if (best < 0 || eta < best_eta) {
      best = static_cast<int>(i);
      best_eta = eta;
    }
  }
  return best;
}

std::string link_splitter::pick(const cluster_view& v, const route_input& in, double kv_bytes) {
  const double bits = std::max(1.0, kv_bytes) * 8.0;
  std::vector<std::pair<const link_view*, double>> open; // with its start
  for (auto& l : v.links) {
    const double rate = l.capacity_bps > 0 ? l.capacity_bps : l.throughput_bps;
    const bool usable = rate > 0 && std::any_of(v.prefill.begin(), v.prefill.end(), [&](auto& w) {
                          return w.prfaas && w.cluster == l.cluster && eligible(v, in, w);
                        });
    if (!usable)
      continue; // its tag stays: what it carried still counts when it opens
    auto it = tag_.find(l.cluster);
    open.emplace_back(&l, std::max(now_, it == tag_.end() ? now_ : it->second));
  }
  auto rate_of = [](const link_view* l) {
    return l->capacity_bps > 0 ? l->capacity_bps : l->throughput_bps;
  };
  const std::pair<const link_view*, double>* best = nullptr;
  for (auto& o : open)
    if (best == nullptr ||
        o.second + bits / rate_of(o.first) < best->second + bits / rate_of(best->first))
      best = &o;
  if (best == nullptr)
    return {};
  const std::string chosen = best->first->cluster;
  tag_[chosen] = best->second + bits / rate_of(best->first);
  // Virtual time: the earliest tag among the open links. A link closed meanwhile that
  // falls behind it is lifted to it when it opens.
  now_ = tag_[chosen];
  for (auto& o : open)
    now_ = std::min(now_, o.first->cluster == chosen ? tag_[chosen] : o.second);
  return chosen;
}

int offload_prefill(const cluster_view& v, const route_input& in, double load_weight,
                    link_splitter* split) {
  if (v.links.size() >= 2 && split != nullptr) {
    const auto tokens = static_cast<uint64_t>(in.prompt_tokens);
    const double bytes = v.kv_bytes ? v.kv_bytes(tokens) : static_cast<double>(tokens);
    const std::string cluster = split->pick(v, in, bytes);
    int best = -1;
    double best_eta = 0;
    for (size_t i = 0; i < v.prefill.size(); ++i) {
      auto& w = v.prefill[i];
      if (!w.prfaas || w.cluster != cluster || !eligible(v, in, w))
        continue;
      const double eta = expected_ready_seconds(v, in, i);
      // No measured pace yet: the least work pending, as a pace-free order.
      const double key = eta >= 0 ? eta : static_cast<double>(w.pending_tokens());
      if (best < 0 || key < best_eta) {
        best = static_cast<int>(i);
        best_eta = key;
      }
    }
    if (best >= 0)
      return best;
  }
  if (v.links.size() >= 2)
    if (int i = fastest_prefill(v, in, true, true); i >= 0)
      return i;
  return best_prefill(v, in, true, load_weight);
}

namespace {

void finish(route_choice& c, const route_input& in, const cluster_view& v) {
  if (c.prefill < 0) {
    c.why_not = "no prefill worker is up";
    c.decode = -1;
    return;
  }
  c.route = v.prefill[c.prefill].prfaas ? "prfaas" : "pd";
  c.uncached_tokens = in.prompt_tokens - cached_on(in, v.prefill[c.prefill]);
}

/// `prfaas`: the paper's policy (§3.4.3), with its short-term controller.
class prfaas_policy final : public routing_policy {
public:
  prfaas_policy(threshold_controller::settings t, bandwidth_mode::bounds b,
                duration backlog_horizon, double load_weight, bool move_caches, bool by_cost,
                bool split_by_rate)
      : mode_(b), backlog_horizon_(backlog_horizon), load_weight_(load_weight),
        move_caches_(move_caches), by_cost_(by_cost), control_(t, {}) {
    if (split_by_rate)
      split_.emplace();
  }
  std::string name() const override { return "prfaas"; }

  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    const double pressure = v.link_pressure(backlog_horizon_);
    const bool scarce = mode_.update(pressure, v.prfaas_pending_tokens());
    c.mode = scarce ? "scarce" : "abundant";
    // t answers the link only: scarce because of the PrfaaS queue alone (a burst on an
    // idle link) leaves it planned — raising it would push the burst onto the PD side.
    const bool link_bound = scarce && pressure > mode_.limits().abundant_utilisation;
    // How long new work waits on each side (the PrfaaS side's: its queue or the
    // link's backlog, the longer).
    threshold_controller::queue_signals queues;
    queues.pd_seconds = v.prefill_drain_seconds(false);
    const double pf = v.prefill_drain_seconds(true);
    queues.prfaas_seconds = pf < 0 ? -1 : std::max(pf, v.link_queue_seconds);
    queues.pd_pace_tokens_per_s = v.prefill_pace(false);
    // Move t only with the model's KV size known (otherwise t stays planned), and not
    // while the link is down: nothing is offloaded then whatever t is, and the PD
    // queue that grows meanwhile must not leave t at its floor for when it is back.
    const uint64_t t =
        v.kv_bytes && v.link_up
            ? control_with(v.kv_bytes)
                  .update(v.now, link_bound,
                          {v.link_capacity_bps, v.link_throughput_bps, v.link_backlog_bytes},
                          queues)
            : control_.threshold();
    c.threshold = t;
    c.threshold_reason = control_.last_reason();
    if (!pick_decode(c, in, v))
      return c;
    const uint32_t l = in.prompt_tokens;
    const uint32_t l_pd = best_cache(v, in, false);
    const uint32_t l_prfaas = best_cache(v, in, true);
    const bool can_offload = !in.local_only && v.link_up && has_side(v, in, true);
    bool offload = false;
    uint32_t judged = 0; // the uncached length compared with t
    if (scarce || !move_caches_) {
      // (Without cache moves — the workers cannot pull a cache across the link yet —
      // abundant bandwidth changes nothing: a cache only counts where it is.)
      // Each cluster's cache judged on its own: what the PD cluster would compute
      // decides; nothing crosses the link that PD-P can do within the threshold.
      judged = l - l_pd;
      offload = can_offload && judged > t;
    } else {
      // The best cache anywhere counts; it moves to where the prefill runs.
      judged = l - std::max(l_pd, l_prfaas);
      offload = can_offload && judged > t;
      c.move_cache = offload ? l_pd > l_prfaas : l_prfaas > l_pd;
    }
    control_.observe(v.now, judged);
    c.basis = "threshold";
    // By cost: the worker, either side, that has this prompt's KV ready soonest — unless
    // the link is the bottleneck (Eq. 2 is a hard bound: then t, fitted to the link,
    // decides) or a side has no measured pace yet (then t, the planned point, decides).
    if (by_cost_ && !link_bound && !in.local_only)
      c.prefill = fastest_prefill(v, in, can_offload);
    if (c.prefill >= 0) {
      c.basis = "cost";
      c.move_cache = false; // a cache counts where it is
    } else {
      link_splitter* split = split_ ? &*split_ : nullptr;
      c.prefill = offload ? offload_prefill(v, in, load_weight_, split)
                          : best_prefill(v, in, false, load_weight_);
      if (c.prefill < 0 && !offload && can_offload && !has_side(v, in, false))
        c.prefill = offload_prefill(v, in, load_weight_, split); // no PD prefill left at all
    }
    finish(c, in, v);
    if (c.prefill >= 0 && c.move_cache && !scarce)
      pick_cache_source(c, in, v);
    return c;
  }

  bool replan(std::chrono::steady_clock::time_point now, uint64_t planned) override {
    control_.replan(now, planned);
    return true;
  }

private:
  /// The holder of the best cache on the other side of the chosen worker.
  static void pick_cache_source(route_choice& c, const route_input& in, const cluster_view& v) {
    const bool other = !v.prefill[c.prefill].prfaas;
    uint32_t best = cached_on(in, v.prefill[c.prefill]);
    for (size_t i = 0; i < v.prefill.size(); ++i) {
      auto& w = v.prefill[i];
      if (w.routable() && w.prfaas == other && v.offload_open(w) && cached_on(in, w) > best) {
        best = cached_on(in, w);
        c.cache_source = static_cast<int>(i);
      }
    }
    c.move_cache = c.cache_source >= 0;
    if (c.move_cache)
      c.uncached_tokens = in.prompt_tokens - best;
  }

  /// The controller, told the model's KV size (the view carries it; it never changes).
  threshold_controller& control_with(const std::function<double(uint64_t)>& kv) {
    if (!has_kv_) {
      control_ = threshold_controller{control_.config(), kv};
      has_kv_ = true;
    }
    return control_;
  }

  bandwidth_mode mode_;
  duration backlog_horizon_;
  double load_weight_;
  bool move_caches_;
  bool by_cost_;
  std::optional<link_splitter> split_; ///< `link_split: rate`
  threshold_controller control_;
  bool has_kv_ = false;
};

/// `homogeneous_pd`: a plain PD deployment, as its operator would route it: each
/// prefill to the PD worker with the least pending work (reports plus what was routed
/// since), never across the link.
class homogeneous_policy final : public routing_policy {
public:
  std::string name() const override { return "homogeneous_pd"; }
  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    if (!pick_decode(c, in, v))
      return c;
    c.prefill = least_loaded_prefill(v, false, in.exclude_nodes);
    finish(c, in, v);
    return c;
  }
};

/// `homogeneous_pd_round_robin`: the same deployment behind a load-blind router, kept
/// as a named variant to show what load-awareness is worth (not a baseline to beat).
class round_robin_policy final : public routing_policy {
public:
  std::string name() const override { return "homogeneous_pd_round_robin"; }
  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    if (!pick_decode(c, in, v))
      return c;
    const size_t n = v.prefill.size();
    for (size_t k = 0; k < n && c.prefill < 0; ++k) {
      size_t i = (next_ + k) % n;
      auto& w = v.prefill[i];
      if (w.routable() && !w.prfaas && !excluded(in, w.addr.node)) {
        c.prefill = static_cast<int>(i);
        next_ = i + 1;
      }
    }
    finish(c, in, v);
    return c;
  }

private:
  size_t next_ = 0;
};

/// `kv_router`: a KV-aware router for PD-only deployments, scored the way Dynamo's KV
/// router and llm-d's scorers do: each PD prefill worker costs the prompt's tokens it
/// would compute (what its cache does not hold) + load_weight x its pending prefill work
/// + decode_weight x the sequences decoding on its node (a node that also decodes
/// computes both). The decode worker is the least occupied. Never crosses the link.
class kv_router_policy final : public routing_policy {
public:
  kv_router_policy(double load_weight, double decode_weight)
      : load_weight_(load_weight), decode_weight_(decode_weight) {}
  std::string name() const override { return "kv_router"; }
  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    if (!pick_decode(c, in, v))
      return c;
    double best_cost = 0;
    for (size_t i = 0; i < v.prefill.size(); ++i) {
      auto& w = v.prefill[i];
      if (!w.routable() || w.prfaas || excluded(in, w.addr.node))
        continue;
      double cost = static_cast<double>(in.prompt_tokens - cached_on(in, w)) +
                    load_weight_ * static_cast<double>(w.pending_tokens()) +
                    decode_weight_ * static_cast<double>(decoding_on(v, w.addr.node));
      if (c.prefill < 0 || cost < best_cost) {
        c.prefill = static_cast<int>(i);
        best_cost = cost;
      }
    }
    finish(c, in, v);
    return c;
  }

private:
  static uint32_t decoding_on(const cluster_view& v, const std::string& node) {
    uint32_t n = 0;
    for (auto& d : v.decode)
      if (d.up && d.addr.node == node)
        n += d.occupancy();
    return n;
  }

  double load_weight_;
  double decode_weight_;
};

/// `naive_heterogeneous`: every prefill on the PrfaaS cluster (PD only when the link
/// or the whole PrfaaS cluster is down, so the baseline still serves).
class naive_policy final : public routing_policy {
public:
  std::string name() const override { return "naive_heterogeneous"; }
  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    if (!pick_decode(c, in, v))
      return c;
    if (!in.local_only && v.link_up)
      c.prefill = least_loaded_prefill(v, true, in.exclude_nodes);
    if (c.prefill < 0)
      c.prefill = least_loaded_prefill(v, false, in.exclude_nodes);
    finish(c, in, v);
    return c;
  }
};

/// `cache_aware_only`: Mooncake-style placement over every prefill worker, no threshold.
class cache_aware_policy final : public routing_policy {
public:
  explicit cache_aware_policy(double load_weight) : load_weight_(load_weight) {}
  std::string name() const override { return "cache_aware_only"; }
  route_choice decide(const route_input& in, const cluster_view& v) override {
    route_choice c;
    if (!pick_decode(c, in, v))
      return c;
    int pd = best_prefill(v, in, false, load_weight_);
    int pf = in.local_only || !v.link_up ? -1 : best_prefill(v, in, true, load_weight_);
    auto cost = [&](int i) {
      auto& w = v.prefill[i];
      return static_cast<double>(in.prompt_tokens - cached_on(in, w)) +
             load_weight_ * static_cast<double>(w.pending_tokens());
    };
    c.prefill = pd < 0 ? pf : pf < 0 ? pd : (cost(pf) < cost(pd) ? pf : pd);
    finish(c, in, v);
    return c;
  }

private:
  double load_weight_;
};

bandwidth_mode::bounds bounds_of(const actor_params& p) {
  bandwidth_mode::bounds b;
  b.scarce_utilisation = number_or(p, "scarce_utilisation", b.scarce_utilisation);
  b.abundant_utilisation = number_or(p, "abundant_utilisation", b.abundant_utilisation);
  b.scarce_queue_tokens = static_cast<uint64_t>(
      integer_or(p, "scarce_queue_tokens", static_cast<int64_t>(b.scarce_queue_tokens)));
  b.abundant_queue_tokens = static_cast<uint64_t>(
      integer_or(p, "abundant_queue_tokens", static_cast<int64_t>(b.abundant_queue_tokens)));
  return b;
}

threshold_controller::settings control_of(const actor_params& p) {
  threshold_controller::settings t;
  t.planned = static_cast<uint64_t>(integer_or(p, "threshold", 4096));
  if (auto m = integer_or(p, "max_threshold", 0); m > 0)
    t.max = static_cast<uint64_t>(m);
  else
    t.max = std::numeric_limits<uint64_t>::max(); // no bound but the prompts themselves
  t.target_utilisation = number_or(p, "target_utilisation", t.target_utilisation);
  t.min = static_cast<uint64_t>(integer_or(p, "min_threshold", 0));
  t.balance_ratio = number_or(p, "balance_ratio", t.balance_ratio);
  t.balance_slack_s = p.has("balance_slack")
                          ? std::chrono::duration<double>(p.dur("balance_slack")).count()
                          : t.balance_slack_s;
  t.balance_step = number_or(p, "balance_step", t.balance_step);
  if (p.has("control_window"))
    t.window = p.dur("control_window");
  if (p.has("retune_interval"))
    t.retune_interval = p.dur("retune_interval");
  return t;
}

/// `offload: cost | threshold` (default threshold).
bool offload_by_cost(const actor_params& p) {
  const std::string o = p.has("offload") ? p.str("offload") : "threshold";
  if (o != "cost" && o != "threshold")
    throw std::invalid_argument("scheduler: offload must be cost or threshold, not \"" + o + "\"");
  return o == "cost";
}

/// `link_split: soonest | rate` (default soonest).
bool split_by_rate(const actor_params& p) {
  const std::string o = p.has("link_split") ? p.str("link_split") : "soonest";
  if (o != "soonest" && o != "rate")
    throw std::invalid_argument("scheduler: link_split must be soonest or rate, not \"" + o + "\"");
  return o == "rate";
}

PRFAAS_REGISTER_POLICY("prfaas", [](const actor_params& p) -> std::unique_ptr<routing_policy> {
  return std::make_unique<prfaas_policy>(
      control_of(p), bounds_of(p),
      p.has("backlog_horizon") ? p.dur("backlog_horizon") : std::chrono::seconds(1),
      number_or(p, "load_weight", 1.0), !p.has("move_caches") || p.boolean("move_caches"),
      offload_by_cost(p), split_by_rate(p));
});
PRFAAS_REGISTER_POLICY("homogeneous_pd",
                       [](const actor_params&) -> std::unique_ptr<routing_policy> {
                         return std::make_unique<homogeneous_policy>();
                       });
PRFAAS_REGISTER_POLICY("homogeneous_pd_round_robin",
                       [](const actor_params&) -> std::unique_ptr<routing_policy> {
                         return std::make_unique<round_robin_policy>();
                       });
PRFAAS_REGISTER_POLICY("kv_router", [](const actor_params& p) -> std::unique_ptr<routing_policy> {
  return std::make_unique<kv_router_policy>(number_or(p, "load_weight", 1.0),
                                            number_or(p, "decode_weight", 512.0));
});
PRFAAS_REGISTER_POLICY("naive_heterogeneous",
                       [](const actor_params&) -> std::unique_ptr<routing_policy> {
                         return std::make_unique<naive_policy>();
                       });
PRFAAS_REGISTER_POLICY("cache_aware_only",
                       [](const actor_params& p) -> std::unique_ptr<routing_policy> {
                         return std::make_unique<cache_aware_policy>(
                             number_or(p, "load_weight", 1.0));
                       });

} // namespace

int best_prefill(const cluster_view& v, const route_input& in, bool prfaas_side,
                 double load_weight) {
  int best = -1;
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < v.prefill.size(); ++i) {
    auto& w = v.prefill[i];
    if (w.prfaas != prfaas_side || !eligible(v, in, w))
      continue;
    // Tokens this worker would compute, plus what already waits for it.
    double cost = static_cast<double>(in.prompt_tokens - cached_on(in, w)) +
                  load_weight * static_cast<double>(w.pending_tokens());
    if (best < 0 || cost < best_cost) {
      best = static_cast<int>(i);
      best_cost = cost;
    }
  }
  return best;
}

} // namespace prfaas::serving

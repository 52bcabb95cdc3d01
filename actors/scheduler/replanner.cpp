#include "scheduler/replanner.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "prfaas/planner/multi.hpp"
#include "prfaas/planner/planner.hpp"

namespace prfaas::serving {

namespace {

/// `p` with every prefill time multiplied by `k` (S_kv and decode unchanged).
engine::profile slowed(engine::profile p, double k) {
  for (auto& pt : p.points)
    pt.prefill_s *= k;
  return p;
}

uint32_t routable_prfaas(const cluster_view& v) {
  uint32_t n = 0;
  for (auto& w : v.prefill)
    n += w.prfaas && w.routable() ? 1 : 0;
  return n;
}

uint32_t routable_prfaas_of(const cluster_view& v, const std::string& cluster) {
  uint32_t n = 0;
  for (auto& w : v.prefill)
    n += w.prfaas && w.routable() && w.cluster == cluster ? 1 : 0;
  return n;
}

} // namespace

/// A point of a plan as move() weighs it.
struct plan_point {
  double threshold = 0;
  uint32_t n_p = 0, n_d = 0;
  double lambda = 0;   ///< predicted Λ (req/s)
  double capacity = 0; ///< the prefill capacity the t search maximises
  std::string binding;
};

class plan_space {
public:
  virtual ~plan_space() = default;
  /// The model at t and split (n_p, n_d).
  virtual plan_point at(double t, uint32_t n_p, uint32_t n_d) const = 0;
  /// The best t at split (n_p, n_d).
  virtual plan_point best_t(uint32_t n_p, uint32_t n_d) const = 0;
  /// The best split with N_p in [lo, hi] of `total`, each at its best t.
  virtual plan_point best_split(uint32_t total, uint32_t lo, uint32_t hi) const = 0;
};

namespace {

/// One link: Eq. 3–8 (planner.hpp).
class one_link final : public plan_space {
public:
  one_link(planner::throughput_model m, uint32_t n_prfaas) : m_(std::move(m)), n_(n_prfaas) {}
  plan_point at(double t, uint32_t n_p, uint32_t n_d) const override {
    return of(m_.evaluate(t, n_, n_p, n_d));
  }
  plan_point best_t(uint32_t n_p, uint32_t n_d) const override {
    return of(planner::best_threshold(m_, n_, n_p, n_d));
  }
  plan_point best_split(uint32_t total, uint32_t lo, uint32_t hi) const override {
    return of(planner::best_split(m_, n_, total, lo, hi));
  }

private:
  static plan_point of(const planner::operating_point& op) {
    return {op.threshold,
            op.n_p,
            op.n_d,
            op.lambda,
            planner::prefill_capacity(op),
            planner::to_string(op.binding)};
  }
  planner::throughput_model m_;
  uint32_t n_;
};

/// Several links: the LP of this PD cluster and the PrfaaS clusters it links to
/// (planner/multi.hpp).
class several_links final : public plan_space {
public:
  explicit several_links(planner::multi_inputs in) : m_(std::move(in)) {}
  plan_point at(double t, uint32_t n_p, uint32_t n_d) const override {
    return of(m_.evaluate({{t, n_p, n_d}}));
  }
  plan_point best_t(uint32_t n_p, uint32_t n_d) const override {
    return of(planner::best_threshold(m_, n_p, n_d));
  }
  plan_point best_split(uint32_t, uint32_t lo, uint32_t hi) const override {
    return of(planner::best_split(m_, lo, hi));
  }

private:
  /// The binding constraint named as Eq. 6's terms are: the PD cluster's decode or
  /// prefill, else a link, else a PrfaaS cluster's compute.
  static plan_point of(const planner::multi_point& mp) {
    const auto& c = mp.choice.at(0);
    plan_point out{c.threshold, c.n_p, c.n_d, mp.lambda, mp.prefill_lambda, {}};
    const auto any = [](const auto& list) {
      return std::any_of(list.begin(), list.end(), [](const auto& f) { return f.binding; });
    };
    if (mp.pd.at(0).decode_binding)
      out.binding = planner::to_string(planner::constraint::pd_decode);
    else if (mp.pd.at(0).prefill_binding)
      out.binding = planner::to_string(planner::constraint::pd_prefill);
    else if (any(mp.links))
      out.binding = planner::to_string(planner::constraint::link);
    else if (any(mp.prfaas))
      out.binding = planner::to_string(planner::constraint::prfaas_prefill);
    else // nothing at its bound (a flat LP): named as the one-cluster model's default
      out.binding = planner::to_string(planner::constraint::pd_decode);
    return out;
  }
  planner::multi_model m_;
};

/// The LP's inputs for this PD cluster's links, from the one-link inputs `in` (the
/// window's lengths, the scaled profiles): every link that is up, at its usable
/// bandwidth, to a PrfaaS cluster with routable workers. Empty when none is.
std::optional<planner::multi_inputs> several_inputs(const cluster_view& v,
                                                    const replanner::settings& s,
                                                    const planner::case_inputs& in,
                                                    double& usable_gbps) {
  planner::multi_inputs out;
  static_cast<planner::workload_inputs&>(out) = in;
  out.name = in.name;
  out.pd.push_back({"pd", in.pd, 1});
  out.split_by_rate = s.split_by_rate;
  usable_gbps = 0;
  for (auto& l : v.links) {
    const auto cfg =
        s.links.count(l.cluster) ? s.links.at(l.cluster) : replanner::settings::prfaas_link{};
    double usable = l.capacity_bps > 0 ? l.capacity_bps : cfg.rate_bps;
    if (l.queue_seconds > 0 && l.throughput_bps > 0)
      usable = l.throughput_bps; // backed up: what it delivers, as with one link
    const uint32_t n = routable_prfaas_of(v, l.cluster);
    if (!l.up || usable <= 0 || n == 0 || cfg.share <= 0)
      continue;
    // This PD cluster's share of the cluster's workers: its prefill times stretched.
    out.prfaas.push_back({l.cluster, {slowed(in.prfaas.profile, 1 / cfg.share), n}});
    out.links.push_back({out.prfaas.size() - 1, 0, usable / 1e9});
    usable_gbps += usable / 1e9;
  }
  if (out.prfaas.empty())
    return std::nullopt;
  return out;
}

} // namespace

replanner::replanner(settings s, profiles p, uint64_t planned_t)
    : s_(s), p_(std::move(p)), planned_(std::clamp(planned_t, s.min_t, s.max_t)) {}

void replanner::observe(time_point now, uint64_t uncached, uint32_t output_tokens) {
  samples_.push_back({now, std::max<uint64_t>(uncached, 1), output_tokens});
  while (samples_.size() > s_.max_samples)
    samples_.pop_front();
}

void replanner::expire(time_point now) {
  while (!samples_.empty() && now - samples_.front().at > s_.window)
    samples_.pop_front();
}

double replanner::scale(bool prfaas_side, const cluster_view& v) const {
  const auto& prof = prfaas_side ? p_.prfaas : p_.pd;
  double measured = 0, profiled = 0;
  for (auto& w : v.prefill)
    if (w.prfaas == prfaas_side && w.routable())
      for (auto [tokens, seconds] : w.recent_prefills) {
        const double s = prof.prefill_seconds(tokens);
        if (s > 0) {
          measured += seconds;
          profiled += s;
        }
      }
  return measured > 0 && profiled > 0 ? measured / profiled : 1;
}

bool replanner::restart_on_shift(time_point now) {
  if (s_.shift_z <= 0)
    return false;
  double n[2] = {0, 0}, sum[2] = {0, 0}, sq[2] = {0, 0}; // [older, last interval]
  for (auto& x : samples_) {
    const int k = now - x.at <= s_.interval ? 1 : 0;
    const double l = std::log(static_cast<double>(x.uncached));
    n[k] += 1;
    sum[k] += l;
    sq[k] += l * l;
  }
  if (n[0] < 8 || n[1] < 8)
    return false;
  double mean[2], var[2];
  for (int k = 0; k < 2; ++k) {
    mean[k] = sum[k] / n[k];
    var[k] = std::max(0.0, (sq[k] - n[k] * mean[k] * mean[k]) / (n[k] - 1));
  }
  const double se = std::sqrt(var[0] / n[0] + var[1] / n[1]);
  if (!(se > 0) || std::abs(mean[1] - mean[0]) <= s_.shift_z * se)
    return false;
  while (!samples_.empty() && now - samples_.front().at > s_.interval)
    samples_.pop_front();
  return true;
}

std::optional<replanner::decision> replanner::tick(time_point now, const cluster_view& v,
                                                   const pd_instances& pd) {
  if (!started_) { // the first interval gathers samples
    started_ = true;
    last_ = now;
    return std::nullopt;
  }
  if (now - last_ < s_.interval)
    return std::nullopt;
  last_ = now;
  expire(now);
  decision d;
  d.window_restarted = restart_on_shift(now);
  d.t_before = d.t_after = d.t_plan = planned_;
  d.prefill_before = d.prefill_after = target_prefill_.value_or(pd.prefill);
  d.pd_total = pd.prefill + pd.decode;
  d.samples = samples_.size();
  planner::case_inputs in;
  if (auto held = measure(v, pd, in, d))
    return held;
  try {
    if (v.links.size() >= 2) {
      auto several = several_inputs(v, s_, in, d.usable_gbps);
      if (!several) {
        d.reason = "no_link"; // no link up to a cluster with routable workers
        return d;
      }
      move(now, several_links{std::move(*several)}, pd, d);
    } else {
      const uint32_t n_prfaas = in.prfaas.instances;
      move(now, one_link{planner::throughput_model{std::move(in)}, n_prfaas}, pd, d);
    }
  } catch (const std::invalid_argument&) {
    d.reason = "no_workers"; // nothing to decode on at the window's lengths
  }
  return d;
}

std::optional<replanner::decision> replanner::measure(const cluster_view& v, const pd_instances& pd,
                                                      planner::case_inputs& in, decision& d) {
  if (samples_.size() < s_.min_samples) {
    d.reason = "few_samples";
    return d;
  }
  const uint32_t n_prfaas = routable_prfaas(v);
  if (n_prfaas == 0 || pd.decode == 0 || pd.prefill + pd.decode < 2) {
    d.reason = "no_workers";
    return d;
  }
  // Usable bandwidth, as the short-term controller judges it: what the link delivers
  // while it is backed up, else its rate.
  double usable = v.link_capacity_bps > 0 ? v.link_capacity_bps : s_.link_rate_bps;
  if (v.link_queue_seconds > 0 && v.link_throughput_bps > 0)
    usable = v.link_throughput_bps;
  if (!v.link_up || usable <= 0) {
    d.reason = "no_link";
    return d;
  }
  d.usable_gbps = usable / 1e9;
  d.prfaas_scale = scale(true, v);
  d.pd_scale = scale(false, v);
  std::vector<uint64_t> lengths;
  double output = 0;
  for (auto& x : samples_) {
    lengths.push_back(x.uncached);
    output += x.output;
  }
  in.name = "online";
  in.prfaas = {slowed(p_.prfaas, d.prfaas_scale), n_prfaas};
  in.pd = {slowed(p_.pd, d.pd_scale), pd.prefill + pd.decode};
  in.link_gbps = d.usable_gbps;
  in.lengths = planner::length_distribution::empirical(std::move(lengths));
  in.output_tokens =
      std::max<uint64_t>(1, std::llround(output / static_cast<double>(samples_.size())));
  in.slo_tokens_per_s = p_.pd.decode ? p_.pd.decode->slo_tokens_per_s : 0;
  in.threshold_points = 128;
  in.refine_rounds = 2;
  return std::nullopt;
}

bool replanner::wants_split(time_point now, bool shifted, uint32_t best_prefill, double best_lambda,
                            double committed_lambda, uint32_t committed) {
  const bool better = best_prefill != committed && best_lambda > committed_lambda * (1 + s_.t_gain);
  streak_ = better ? (best_prefill == streak_prefill_ ? streak_ + 1 : 1) : 0;
  streak_prefill_ = better ? best_prefill : 0;
  shifted_since_move_ = shifted_since_move_ || shifted;
  const bool patient = better && s_.split_patience > 0 && streak_ >= s_.split_patience;
  // Back the way the last change came, soon after it and with the lengths as they were:
  // only what re-plan after re-plan confirms.
  const bool reverses = split_moved_at_ && !shifted_since_move_ &&
                        now - *split_moved_at_ < s_.split_reverse_hold &&
                        (best_prefill < committed) == (split_moved_from_ < committed);
  // A conversion drains a node: worth it for a clearly better plan at once, or for a
  // smaller gain that re-plan after re-plan points to the same split (else a split chosen
  // on a noisy window, or a flat optimum's neighbour, would hold for good).
  const bool go =
      best_prefill != committed &&
      (reverses ? patient : best_lambda > committed_lambda * (1 + s_.split_gain) || patient);
  if (go) {
    streak_ = 0;
    split_moved_at_ = now;
    split_moved_from_ = committed;
    shifted_since_move_ = false;
  }
  return go;
}

void replanner::move(time_point now, const plan_space& m, const pd_instances& pd, decision& d) {
  const uint32_t total = pd.prefill + pd.decode;
  d.lambda_now = m.at(static_cast<double>(planned_), pd.prefill, pd.decode).lambda;
  auto target = m.best_t(pd.prefill, pd.decode);
  if (pd.max_prefill > pd.min_prefill) {
    const uint32_t hi = std::min(pd.max_prefill, total - 1);
    const uint32_t lo = std::min(pd.min_prefill, hi);
    // The split already committed to (conversions may still be under way toward it) is
    // what a new one must beat, not the split of the moment: else a re-plan during a
    // drain would call it back.
    const uint32_t committed = std::clamp(target_prefill_.value_or(pd.prefill), lo, hi);
    target = m.best_t(committed, total - committed);
    const auto best = m.best_split(total, lo, hi);
    if (wants_split(now, d.window_restarted, best.n_p, best.lambda, target.lambda, committed))
      target = best;
    target_prefill_ = target.n_p;
    d.prefill_after = target.n_p;
  }
  d.lambda_plan = target.lambda;
  d.binding = target.binding;
  const auto t_plan = std::clamp<uint64_t>(
      static_cast<uint64_t>(std::llround(std::max(target.threshold, 0.0))), s_.min_t, s_.max_t);
  d.t_plan = t_plan;
  const double from = static_cast<double>(std::max<uint64_t>(planned_, 1));
  const double ratio = static_cast<double>(std::max<uint64_t>(t_plan, 1)) / from;
  const auto here = m.at(from, target.n_p, total - target.n_p);
  const bool worth = target.capacity > here.capacity * (1 + s_.t_gain);
  if (worth && std::abs(std::log(ratio)) > std::log1p(s_.hysteresis)) {
    const double step = std::clamp(ratio, 1 / s_.max_step, s_.max_step);
    planned_ =
        std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(from * step)), s_.min_t, s_.max_t);
    // The last bounded step lands on the plan itself.
    if (ratio == step)
      planned_ = t_plan;
  }
  d.t_after = planned_;
  d.reason = d.t_after != d.t_before || d.prefill_after != d.prefill_before ? "moved" : "held";
}

} // namespace prfaas::serving

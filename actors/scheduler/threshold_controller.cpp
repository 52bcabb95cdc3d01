#include "scheduler/threshold_controller.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace prfaas::serving {

threshold_controller::threshold_controller(settings s, kv_bytes_fn kv_bytes)
    : s_(s), kv_bytes_(std::move(kv_bytes)), t_(s.planned) {
  s_.max = std::max(s_.max, s_.planned);
  s_.min = std::min(s_.min, s_.planned);
}

void threshold_controller::set(time_point now, uint64_t t, const char* reason) {
  last_retune_ = now;
  ++retunes_;
  if (t != t_)
    reason_ = reason;
  t_ = t;
}

void threshold_controller::replan(time_point now, uint64_t planned) {
  planned = std::clamp(planned, s_.min, s_.max);
  const double f =
      s_.planned == 0 ? 0 : static_cast<double>(planned) / static_cast<double>(s_.planned);
  const uint64_t t =
      f == 0
          ? planned
          : std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(static_cast<double>(t_) * f)),
                                 s_.min, s_.max);
  s_.planned = planned;
  set(now, t, "replan");
}

threshold_controller::balance_state threshold_controller::balance(time_point now, bool due,
                                                                  const queue_signals& q) {
  const side was = behind_;
  behind_ = side::none;
  if (s_.balance_ratio <= 0 || q.pd_seconds < 0 || q.prfaas_seconds < 0)
    return balance_state::unknown;
  const double pd = q.pd_seconds, pf = q.prfaas_seconds;
  if (pd > s_.balance_ratio * pf && pd - pf > s_.balance_slack_s)
    behind_ = side::pd; // offload more
  else if (pf > s_.balance_ratio * pd && pf - pd > s_.balance_slack_s)
    behind_ = side::prfaas; // offload less
  else                      // both keep up, or both are behind by about as much (t holds)
    return pd <= s_.balance_slack_s && pf <= s_.balance_slack_s ? balance_state::calm
                                                                : balance_state::acted;
  // Only an imbalance that lasts a retune interval moves t: one long prompt joining a
  // queue is not a trend.
  if (was != behind_)
    behind_since_ = now;
  if (due && now - behind_since_ >= s_.retune_interval) {
    if (behind_ == side::pd && t_ > s_.min)
      set(now, std::max<uint64_t>(s_.min, static_cast<uint64_t>(static_cast<double>(t_) / step())),
          "pd_behind");
    else if (behind_ == side::prfaas && t_ < s_.max)
      set(now, std::min(s_.max, raised()), "prfaas_behind");
  }
  return balance_state::acted;
}

const char* threshold_controller::behind() const {
  return behind_ == side::pd ? "pd" : behind_ == side::prfaas ? "prfaas" : "";
}

uint64_t threshold_controller::raised() const {
  return std::max<uint64_t>(t_ + 1, static_cast<uint64_t>(static_cast<double>(t_) * step()));
}

void threshold_controller::observe(time_point now, uint64_t uncached_tokens) {
  samples_.emplace_back(now, uncached_tokens);
  while (samples_.size() > s_.max_samples)
    samples_.pop_front();
}

void threshold_controller::expire(time_point now) {
  while (!samples_.empty() && now - samples_.front().first > s_.window)
    samples_.pop_front();
}

uint64_t threshold_controller::update(time_point now, bool scarce, const link_signals& link) {
  return update(now, scarce, link, queue_signals{});
}

uint64_t threshold_controller::update(time_point now, bool scarce, const link_signals& link,
                                      const queue_signals& queues) {
  expire(now);
  const bool entering = scarce && !scarce_;
  scarce_ = scarce;
  bool due = now - last_retune_ >= s_.retune_interval;
  // Entering a scarce episode t jumps toward the link fit at once, balancing or not:
  // after a rate cut of two orders of magnitude balancing's one step per retune
  // interval (256 → 320 → 400 ...) would let long prompts cross for many intervals more
  // than the link can carry, and some would miss their deadline. The jump stops where
  // the PD cluster's pace runs out: a jump beyond it floods the PD cluster (the sims'
  // 6 Gbit/s step: mean TTFT 4.3 → 33 s), and balancing splits the wait from there.
  if (entering && fit_link(now, link, absorbable(now, queues.pd_pace_tokens_per_s)))
    due = false; // one move per call
  if (balance(now, due, queues) == balance_state::acted)
    return t_;
  if (scarce) {
    // Balancing is calm or blind: the link fit alone, on entering (the PD cluster's
    // pace does not bound it then: nothing says it is behind) and once per retune
    // interval; within the episode it only raises t.
    if (entering || due)
      fit_link(now, link);
    return t_;
  }
  // Abundant again (bandwidth_mode's hysteresis already passed), or both sides keep up:
  // back toward the planned t in halvings (doublings from below), one per retune
  // interval, so a link that only just caught up is not flooded at once again (no
  // scarce/abundant cycling of t).
  if (t_ != s_.planned && due) {
    t_ = t_ > s_.planned ? std::max(s_.planned, t_ / 2)
                         : std::min(s_.planned, std::max<uint64_t>(1, t_) * 2);
    reason_ = "back_to_plan";
    last_retune_ = now;
  }
  return t_;
}

double threshold_controller::span_seconds(time_point now) const {
  // At least a second, so a handful of requests right after start is not a burst
  // the link has to carry in no time.
  return samples_.empty()
             ? 1.0
             : std::max(1.0, std::chrono::duration<double>(now - samples_.front().first).count());
}

uint64_t threshold_controller::absorbable(time_point now, double pace) const {
  if (pace <= 0 || samples_.empty())
    return t_;
  std::vector<uint64_t> lengths;
  lengths.reserve(samples_.size());
  for (auto& [_, l] : samples_)
    lengths.push_back(l);
  std::sort(lengths.begin(), lengths.end());
  // Shortest first: raising t adds the requests in this order to the PD cluster.
  const double budget = s_.absorb_share * pace * span_seconds(now);
  double tokens = 0;
  uint64_t t = t_;
  for (size_t i = 0; i < lengths.size();) {
    const uint64_t l = lengths[i];
    double add = 0;
    for (; i < lengths.size() && lengths[i] == l; ++i)
      add += static_cast<double>(l);
    if (tokens + add > budget)
      return std::max(t_, t);
    tokens += add;
    t = std::max(t, l); // every request of length l stays in the PD cluster at t = l
  }
  return UINT64_MAX; // the PD cluster takes all of it
}

bool threshold_controller::fit_link(time_point now, const link_signals& link, uint64_t cap) {
  // While backed up the link delivers what it measures, not what it was sold as.
  const double usable =
      link.backlog_bytes > 0 && link.throughput_bps > 0
          ? std::min(link.throughput_bps,
                     link.capacity_bps > 0 ? link.capacity_bps : link.throughput_bps)
          : link.capacity_bps;
  if (usable <= 0 || samples_.empty())
    return false;
  std::vector<uint64_t> lengths;
  lengths.reserve(samples_.size());
  for (auto& [_, l] : samples_)
    lengths.push_back(l);
  const auto found = search(std::move(lengths), span_seconds(now), s_.target_utilisation * usable,
                            kv_bytes_, s_.planned, s_.max);
  const uint64_t before = t_, target = std::max(t_, std::min(found, cap));
  if (cap != UINT64_MAX && target == before)
    return false;               // a jump that cannot move t leaves no trace
  set(now, target, "link_fit"); // a re-search counts as a retune, moved or not
  return target != before;
}

uint64_t threshold_controller::search(std::vector<uint64_t> lengths, double span_seconds,
                                      double budget_bps, const kv_bytes_fn& kv_bytes,
                                      uint64_t planned, uint64_t max) {
  // Longest first: lowering t from `max` adds the requests in this order, so the
  // egress grows monotonically and the first length that does not fit ends the search.
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  double bits = 0;
  for (size_t i = 0; i < lengths.size();) {
    const uint64_t l = lengths[i];
    if (l <= planned)
      break;
    // Every request of exactly this length goes together (offload iff l > t).
    double add = 0;
    for (; i < lengths.size() && lengths[i] == l; ++i)
      add += kv_bytes(l) * 8.0;
    if ((bits + add) / span_seconds > budget_bps)
      return std::min(max, l); // t = l: offload only what is longer than l
    bits += add;
  }
  return planned; // everything above the planned t fits
}

} // namespace prfaas::serving

#include "scheduler/role_controller.hpp"

#include <algorithm>

namespace prfaas::serving {

role_controller::role_controller(settings s, const cluster_view& v) : s_(s) {
  for (size_t p = 0; p < v.prefill.size(); ++p) {
    if (v.prefill[p].prfaas)
      continue;
    for (size_t d = 0; d < v.decode.size(); ++d)
      if (v.decode[d].addr.node == v.prefill[p].addr.node &&
          v.prefill[p].enabled != v.decode[d].enabled) // exactly one role takes work
        nodes_.push_back({v.prefill[p].addr.node, p, d});
  }
}

std::pair<uint32_t, uint32_t> role_controller::pd_roles(const cluster_view& v) {
  uint32_t p = 0, d = 0;
  for (auto& w : v.prefill)
    p += !w.prfaas && w.routable() ? 1 : 0;
  for (auto& w : v.decode)
    d += w.routable() ? 1 : 0;
  return {p, d};
}

std::pair<uint32_t, uint32_t> role_controller::prefill_range(const cluster_view& v) const {
  auto [np, nd] = pd_roles(v);
  uint32_t as_prefill = 0, as_decode = 0;
  for (auto& n : nodes_) {
    as_prefill += v.prefill[n.prefill].routable() ? 1 : 0;
    as_decode += v.decode[n.decode].routable() ? 1 : 0;
  }
  const uint32_t lo = std::max(np - as_prefill, std::min(np, s_.min_prefill));
  const uint32_t hi = np + std::min(as_decode, nd > s_.min_decode ? nd - s_.min_decode : 0);
  return {lo, std::max(lo, hi)};
}

void role_controller::measure(const cluster_view& v) {
  double pending = 0, occupancy = 0;
  size_t np = 0, nd = 0;
  for (auto& w : v.prefill)
    if (!w.prfaas && w.routable()) {
      pending += static_cast<double>(w.pending_tokens());
      ++np;
    }
  for (auto& w : v.decode)
    if (w.routable()) {
      occupancy += static_cast<double>(w.occupancy()) / std::max<uint32_t>(1, w.capacity);
      ++nd;
    }
  const double p = np ? pending / static_cast<double>(np) / s_.prefill_full_tokens : 0;
  const double d = nd ? occupancy / static_cast<double>(nd) : 0;
  if (!started_) {
    load_p_ = p;
    load_d_ = d;
    started_ = true;
  } else {
    load_p_ = s_.smoothing * p + (1 - s_.smoothing) * load_p_;
    load_d_ = s_.smoothing * d + (1 - s_.smoothing) * load_d_;
  }
}

std::vector<role_controller::event> role_controller::tick(time_point now, cluster_view& v) {
  std::vector<event> out;
  if (nodes_.empty() || (started_ && now - last_tick_ < s_.interval))
    return out;
  last_tick_ = now;
  measure(v);
  for (auto it = active_.begin(); it != active_.end();)
    if (auto e = progress(now, v, *it)) {
      out.push_back(*e);
      it = active_.erase(it);
    } else {
      ++it;
    }
  if (!out.empty() || (conversions_ > 0 && now - last_change_ < s_.cooldown))
    return out;
  begin(now, v, out);
  return out;
}

void role_controller::begin(time_point now, cluster_view& v, std::vector<event>& out) {
  if (!target_) { // the load rule: one conversion at a time
    if (!active_.empty())
      return;
    auto [np, nd] = pd_roles(v);
    std::optional<event> e;
    if (load_p_ >= s_.high && load_d_ <= s_.low && nd > s_.min_decode)
      e = start(now, v, true);
    else if (load_d_ >= s_.high && load_p_ <= s_.low && np > s_.min_prefill)
      e = start(now, v, false);
    if (e)
      out.push_back(*e);
    return;
  }
  // Toward the target: the prefill count once the drains under way are done.
  while (active_.size() < std::max<uint32_t>(s_.parallel, 1)) {
    auto [np, nd] = pd_roles(v);
    for (auto& c : active_)
      (c.to_prefill ? np : nd) += 1;
    std::optional<event> e;
    if (np < *target_ && nd > s_.min_decode)
      e = start(now, v, true);
    else if (np > *target_ && np > s_.min_prefill)
      e = start(now, v, false);
    if (!e)
      return;
    out.push_back(*e);
  }
}

std::optional<role_controller::event> role_controller::start(time_point now, cluster_view& v,
                                                             bool to_prefill) {
  // The least busy node now serving the role that gives one up.
  std::optional<size_t> pick;
  double best = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto& n = nodes_[i];
    auto& from = to_prefill ? v.decode[n.decode] : v.prefill[n.prefill];
    if (!from.routable())
      continue;
    double busy = to_prefill ? static_cast<double>(from.occupancy())
                             : static_cast<double>(from.pending_tokens());
    if (!pick || busy < best) {
      pick = i;
      best = busy;
    }
  }
  if (!pick)
    return std::nullopt;
  auto& n = nodes_[*pick];
  auto& from = to_prefill ? v.decode[n.decode] : v.prefill[n.prefill];
  from.enabled = false;
  active_.push_back(conversion{*pick, to_prefill, from.reports, now});
  return event{n.node, to_prefill ? "prefill" : "decode", "draining"};
}

std::optional<role_controller::event> role_controller::progress(time_point now, cluster_view& v,
                                                                const conversion& c) {
  auto& n = nodes_[c.node];
  auto& from = c.to_prefill ? v.decode[n.decode] : v.prefill[n.prefill];
  auto& to = c.to_prefill ? v.prefill[n.prefill] : v.decode[n.decode];
  const std::string target = c.to_prefill ? "prefill" : "decode";
  // Drained: a report taken after it stopped getting work shows nothing left.
  if (from.reports > c.reports_at && from.queue + from.active + from.assigned == 0) {
    to.enabled = true;
    last_change_ = now;
    ++conversions_;
    return event{n.node, target, "converted"};
  }
  if (now - c.since >= s_.drain_timeout || !from.up) {
    from.enabled = true; // give it back rather than lose a node to a stuck drain
    last_change_ = now;
    return event{n.node, target, "aborted"};
  }
  return std::nullopt;
}

} // namespace prfaas::serving

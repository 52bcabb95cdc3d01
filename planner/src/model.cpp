#include "prfaas/planner/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace prfaas::planner {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

uint64_t tokens(double l) {
  return static_cast<uint64_t>(std::llround(std::max(l, 1.0)));
}

} // namespace

std::string to_string(constraint c) {
  switch (c) {
  case constraint::prfaas_prefill:
    return "prfaas_prefill";
  case constraint::link:
    return "link";
  case constraint::pd_prefill:
    return "pd_prefill";
  case constraint::pd_decode:
    return "pd_decode";
  }
  return "?";
}

throughput_model::throughput_model(case_inputs in) : in_(std::move(in)) {
  if (in_.lengths.empty())
    throw std::invalid_argument("planner: empty length distribution");
  if (!in_.prfaas.profile.has_timing() || !in_.pd.profile.has_timing())
    throw std::invalid_argument("planner: both profiles need prefill_points (timing)");
  if (!in_.pd.profile.decode)
    throw std::invalid_argument("planner: the PD profile " + in_.pd.profile.source +
                                " has no 'decode' model");
  const auto& d = in_.lengths;
  cw_ = d.cumulative([](double) { return 1.0; });
  cx_ = d.cumulative([](double l) { return l; });
  ct_prfaas_ =
      d.cumulative([this](double l) { return in_.prfaas.profile.prefill_seconds(tokens(l)); });
  ct_pd_ = d.cumulative([this](double l) { return in_.pd.profile.prefill_seconds(tokens(l)); });
  cs_ = d.cumulative([this](double l) { return in_.prfaas.profile.kv_bytes(tokens(l)); });

  // Decode (Eq. 5): every request decodes on PD-D whichever cluster prefilled it, so the
  // mean context of a running batch is the mean input plus half the output.
  engine::profile dec = in_.pd.profile;
  dec.decode->slo_tokens_per_s = in_.slo_tokens_per_s;
  const auto context = tokens(d.mean() + static_cast<double>(in_.output_tokens) / 2);
  bs_max_ = dec.max_batch(context);
  step_s_ = bs_max_ > 0 ? dec.decode_seconds(bs_max_, context) : 0;
  per_decode_ = bs_max_ > 0 ? bs_max_ / (step_s_ * static_cast<double>(in_.output_tokens)) : 0;
}

double throughput_model::bucket_time(const engine::profile& prof, const std::vector<double>& ct,
                                     size_t lo, size_t hi, double mean_len) const {
  if (in_.form == prefill_time_form::mean_length)
    return prof.prefill_seconds(tokens(mean_len));
  return (ct[hi] - ct[lo]) / (cw_[hi] - cw_[lo]);
}

operating_point throughput_model::evaluate(double threshold, uint32_t n_prfaas, uint32_t n_p,
                                           uint32_t n_d) const {
  const size_t n = in_.lengths.size();
  const size_t k = in_.lengths.split_index(threshold);
  operating_point op;
  op.threshold = threshold;
  op.n_prfaas = n_prfaas, op.n_p = n_p, op.n_d = n_d;
  const double w_short = cw_[k], w_long = cw_[n] - cw_[k];
  op.p = k == n ? 0.0 : (k == 0 ? 1.0 : w_long / cw_[n]);

  double prfaas_term = inf, pd_p_term = inf, s_long = 0;
  constraint prfaas_kind = constraint::prfaas_prefill;
  if (k < n) { // some requests are long: Eq. 3
    op.l_long = (cx_[n] - cx_[k]) / w_long;
    const double t_long = bucket_time(in_.prfaas.profile, ct_prfaas_, k, n, op.l_long);
    s_long = in_.form == prefill_time_form::mean_length
                 ? in_.prfaas.profile.kv_bytes(tokens(op.l_long))
                 : (cs_[n] - cs_[k]) / w_long;
    op.theta_prfaas_compute = n_prfaas / t_long;
    op.theta_link = in_.link_gbps * 1e9 / 8 / s_long;
    op.theta_prfaas = std::min(op.theta_prfaas_compute, op.theta_link);
    if (op.theta_link < op.theta_prfaas_compute)
      prfaas_kind = constraint::link;
    prfaas_term = op.theta_prfaas / op.p;
  }
  if (k > 0) { // some requests are short: Eq. 4
    op.l_short = cx_[k] / w_short;
    op.theta_pd_p = n_p / bucket_time(in_.pd.profile, ct_pd_, 0, k, op.l_short);
    pd_p_term = op.theta_pd_p / (1 - op.p);
  }
  op.theta_pd_d = n_d * per_decode_;                             // Eq. 5
  op.lambda = std::min({prfaas_term, pd_p_term, op.theta_pd_d}); // Eq. 6
  op.binding = op.lambda == prfaas_term ? prfaas_kind
               : op.lambda == pd_p_term ? constraint::pd_prefill
                                        : constraint::pd_decode;
  if (k < n) // the bytes per request of Eq. 3's link term, so egress ≤ link exactly
    op.egress_gbps = op.lambda * op.p * s_long * 8 / 1e9;
  return op;
}

throughput_model::ttft throughput_model::prefill_ttft(double threshold, bool has_prfaas,
                                                      bool has_pd_p) const {
  const auto& d = in_.lengths;
  const size_t k = has_pd_p ? (has_prfaas ? d.split_index(threshold) : d.size()) : 0;
  std::vector<std::pair<double, double>> tw; // (TTFT, weight)
  tw.reserve(d.size());
  ttft out;
  for (size_t i = 0; i < d.size(); ++i) {
    const auto& prof = i < k ? in_.pd.profile : in_.prfaas.profile;
    const double t = prof.prefill_seconds(tokens(d.points()[i]));
    out.mean_s += d.weights()[i] * t;
    tw.emplace_back(t, d.weights()[i]);
  }
  std::sort(tw.begin(), tw.end());
  double c = 0;
  for (const auto& [t, w] : tw) {
    c += w;
    out.p90_s = t;
    if (c >= 0.9 - 1e-12)
      break;
  }
  return out;
}

double throughput_model::eq2_egress_gbps(uint32_t n_prfaas) const {
  return n_prfaas * in_.prfaas.profile.phi_gbps(tokens(in_.lengths.mean()));
}

} // namespace prfaas::planner

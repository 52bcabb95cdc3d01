#include "prfaas/planner/planner.hpp"

#include "threshold_scan.hpp"

#include <algorithm>
#include <cmath>

namespace prfaas::planner {

namespace {

plan finish(const throughput_model& m, std::string kind, const operating_point& op) {
  plan out;
  out.kind = std::move(kind);
  out.op = op;
  out.ttft = m.prefill_ttft(op.threshold, op.n_prfaas > 0, op.n_p > 0);
  if (op.n_prfaas > 0)
    out.eq2_egress_gbps = m.eq2_egress_gbps(op.n_prfaas);
  return out;
}

} // namespace

double prefill_capacity(const operating_point& op) {
  const double a = op.p > 0 ? op.theta_prfaas / op.p : HUGE_VAL;
  const double b = op.p < 1 ? op.theta_pd_p / (1 - op.p) : HUGE_VAL;
  return std::min(a, b);
}

operating_point best_threshold(const throughput_model& m, uint32_t n_prfaas, uint32_t n_p,
                               uint32_t n_d) {
  const auto& d = m.inputs().lengths;
  // t just below the smallest length offloads everything; n_p = 0 allows nothing else.
  const double t_all = d.min() * (1 - 1e-9);
  if (n_p == 0 || d.size() == 1)
    return m.evaluate(t_all, n_prfaas, n_p, n_d);
  const uint32_t points = std::max<uint32_t>(m.inputs().threshold_points, 8);
  operating_point best = m.evaluate(t_all, n_prfaas, n_p, n_d);
  detail::scan_log_thresholds(std::log(d.min()), std::log(d.max()), points,
                              m.inputs().refine_rounds, [&](double u) {
                                const auto op = m.evaluate(std::exp(u), n_prfaas, n_p, n_d);
                                if (!(prefill_capacity(op) > prefill_capacity(best)))
                                  return false;
                                best = op;
                                return true;
                              });
  return best;
}

operating_point best_split(const throughput_model& m, uint32_t n_prfaas, uint32_t pd_instances,
                           uint32_t np_min, uint32_t np_max) {
  operating_point best;
  bool have = false;
  for (uint32_t n_p = np_min; n_p <= np_max && n_p < pd_instances; ++n_p) {
    const auto op = best_threshold(m, n_prfaas, n_p, pd_instances - n_p);
    const bool better = !have || op.lambda > best.lambda ||
                        (op.lambda == best.lambda && prefill_capacity(op) > prefill_capacity(best));
    if (better)
      best = op, have = true;
  }
  return best;
}

plan optimise_prfaas_pd(const throughput_model& m) {
  const auto& in = m.inputs();
  const uint32_t top = in.pd.instances > 0 ? in.pd.instances - 1 : 0;
  return finish(m, "prfaas_pd", best_split(m, in.prfaas.instances, in.pd.instances, 0, top));
}

plan homogeneous_pd(const throughput_model& m) {
  const auto& in = m.inputs();
  const double t_none = in.lengths.max(); // nothing is longer: p = 0
  operating_point best;
  bool have = false;
  for (uint32_t n_p = 1; n_p < in.homogeneous_instances; ++n_p) {
    const auto op = m.evaluate(t_none, 0, n_p, in.homogeneous_instances - n_p);
    if (!have || op.lambda > best.lambda)
      best = op, have = true;
  }
  return finish(m, "homogeneous_pd", best);
}

plan naive_heterogeneous(const throughput_model& m) {
  const auto& in = m.inputs();
  const auto op =
      m.evaluate(in.lengths.min() * (1 - 1e-9), in.prfaas.instances, 0, in.pd.instances);
  return finish(m, "naive_heterogeneous", op);
}

plan_report plan_all(const throughput_model& m) {
  return {optimise_prfaas_pd(m), homogeneous_pd(m), naive_heterogeneous(m)};
}

} // namespace prfaas::planner

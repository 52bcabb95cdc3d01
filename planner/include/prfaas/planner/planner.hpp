#pragma once

#include "prfaas/planner/model.hpp"

#include <string>

namespace prfaas::planner {

/// One configuration's best operating point and what it implies.
struct plan {
  std::string kind;   ///< "prfaas_pd", "homogeneous_pd" or "naive_heterogeneous"
  operating_point op; ///< at the optimum
  throughput_model::ttft ttft;
  double eq2_egress_gbps = 0; ///< Eq. 2 sizing at L_avg (0 without a PrfaaS cluster)
};

/// The three configurations of the paper's Table 6.
struct plan_report {
  plan prfaas_pd, homogeneous, naive;
  double ratio_vs_homogeneous() const { return prfaas_pd.op.lambda / homogeneous.op.lambda; }
  double ratio_vs_naive() const { return prfaas_pd.op.lambda / naive.op.lambda; }
};

/// PrfaaS-PD: the 2-D search of Eq. 7–8 over t and N_p + N_d = pd.instances (N_prfaas
/// is the whole PrfaaS cluster). For each split the threshold maximising
/// min(Θ_prfaas/p, Θ_pd-p/(1−p)) is found on a log-spaced grid over the support, then
/// refined; Λ caps that with Θ_pd-d. Splits compare by Λ, then by prefill headroom, then
/// fewer prefill instances. N_p = 0 (everything offloaded, t below every length) is a
/// candidate, so the result is never worse than the naive plan.
plan optimise_prfaas_pd(const throughput_model& m);
/// What the threshold search maximises at an operating point: the prefill side of Eq. 6,
/// min(Θ_prfaas/p, Θ_pd-p/(1−p)) (Eq. 7 balances its two terms), before decode caps it.
double prefill_capacity(const operating_point& op);
/// Best Λ of the same model at a fixed split (the threshold search alone).
operating_point best_threshold(const throughput_model& m, uint32_t n_prfaas, uint32_t n_p,
                               uint32_t n_d);
/// The 2-D search restricted to N_p in [np_min, np_max] with N_p + N_d = pd_instances
/// (what an online re-plan may choose when only some PD nodes can convert). Compares
/// splits as optimise_prfaas_pd does. Requires np_min <= np_max < pd_instances.
operating_point best_split(const throughput_model& m, uint32_t n_prfaas, uint32_t pd_instances,
                           uint32_t np_min, uint32_t np_max);
/// Homogeneous PD: all prefill on PD-P, no PrfaaS cluster, N_p + N_d =
/// homogeneous_instances searched.
plan homogeneous_pd(const throughput_model& m);
/// Naive heterogeneous: every prefill on the PrfaaS cluster, every PD instance decodes.
plan naive_heterogeneous(const throughput_model& m);
/// All three.
plan_report plan_all(const throughput_model& m);

} // namespace prfaas::planner

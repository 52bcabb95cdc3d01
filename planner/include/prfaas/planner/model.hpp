#pragma once

#include "prfaas/engine/profile.hpp"
#include "prfaas/planner/length_distribution.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::planner {

/// How a bucket of requests turns into a prefill time per request.
enum class prefill_time_form {
  /// The paper's Eq. 3–4 as printed: T(E[L | bucket]), the time of the mean length.
  mean_length,
  /// E[T(L) | bucket]: the mean time per request (what a saturated instance sustains).
  /// Higher than mean_length wherever T is convex; kept for sensitivity checks.
  expected_time,
};

/// One cluster of identical instances running one profile.
struct cluster_spec {
  engine::profile profile;
  uint32_t instances = 0;
};

/// The workload a plan is made for, and how the model prices and searches it: what the
/// one-cluster inputs and the M × N inputs (multi.hpp) share.
struct workload_inputs {
  length_distribution lengths; ///< uncached input lengths
  uint64_t output_tokens = 0;  ///< L_out
  double slo_tokens_per_s = 0; ///< decode SLO; the step time must stay ≤ 1/SLO
  prefill_time_form form = prefill_time_form::mean_length;
  uint32_t threshold_points = 256; ///< log-spaced t grid before refinement
  uint32_t refine_rounds = 3;      ///< rounds of 64-point refinement around the best t
};

/// Everything the throughput model needs (one config file's worth).
struct case_inputs : workload_inputs {
  std::string name;
  cluster_spec prfaas;                ///< compute-dense prefill-only cluster (H200)
  cluster_spec pd;                    ///< local PD cluster (H20): N_p + N_d = instances
  uint32_t homogeneous_instances = 0; ///< baseline homogeneous PD cluster, pd's hardware
  double link_gbps = 0;               ///< PrfaaS → PD egress, Gbit/s (1e9 bit/s)
};

/// Which term of Eq. 6 (or Eq. 3's inner min) sets Λ at an operating point.
enum class constraint { prfaas_prefill, link, pd_prefill, pd_decode };
std::string to_string(constraint c);

/// The model evaluated at one threshold and instance split. Throughputs in requests/s.
struct operating_point {
  double threshold = 0; ///< t, tokens (l > t → PrfaaS)
  uint32_t n_prfaas = 0, n_p = 0, n_d = 0;
  double p = 0;                    ///< P(L > t)
  double l_long = 0;               ///< E[L | L > t], tokens (0 when p = 0)
  double l_short = 0;              ///< E[L | L ≤ t], tokens (0 when p = 1)
  double theta_prfaas_compute = 0; ///< N_prfaas / T_prfaas(l_long)
  double theta_link = 0;           ///< B_out / S_kv(l_long)
  double theta_prfaas = 0;         ///< Eq. 3: min of the two above (0 without a PrfaaS cluster)
  double theta_pd_p = 0;           ///< Eq. 4: N_p / T_pd(l_short)
  double theta_pd_d = 0;           ///< Eq. 5: N_d · BS_max / (T_decode · L_out)
  double lambda = 0;               ///< Eq. 6: min(Θ_prfaas / p, Θ_pd-p / (1 − p), Θ_pd-d)
  constraint binding = constraint::pd_decode;
  /// KV sent at Λ: Λ·p·S_long, with Eq. 3's bytes per request S_long (S_kv(l_long), or
  /// E[S_kv | L > t] under expected_time; S_kv is near-linear, so they differ by < 1%).
  double egress_gbps = 0;
};

/// Eq. 3–6 over one case. Precomputes the distribution's partial sums once, so an
/// evaluation is two binary searches and a few interpolations.
class throughput_model {
public:
  /// Throws std::invalid_argument when a profile lacks what the model needs (prefill
  /// timing on both, a decode model on the PD profile).
  explicit throughput_model(case_inputs in);

  const case_inputs& inputs() const { return in_; }

  /// Everything offloaded when n_p = 0 would be impossible, so: with n_p = 0 and p < 1
  /// Θ_pd-p/(1 − p) = 0. A term whose denominator is zero (p = 0 or p = 1) is unbounded.
  operating_point evaluate(double threshold, uint32_t n_prfaas, uint32_t n_p, uint32_t n_d) const;

  /// BS_max of a PD decode instance at the mean decode context L_avg + L_out/2.
  uint32_t bs_max() const { return bs_max_; }
  /// T_decode: the step time at BS_max (≤ 1/SLO), seconds.
  double decode_step_s() const { return step_s_; }
  /// Θ_pd-d of one decode instance, requests/s.
  double decode_rate_per_instance() const { return per_decode_; }

  /// Prefill-only TTFT of a routing (no queueing: the model is a capacity model; the KV
  /// transfer overlaps prefill layer by layer): mean and P90 over the length law when
  /// l > t runs on the PrfaaS profile and l ≤ t on the PD one.
  struct ttft {
    double mean_s = 0, p90_s = 0;
  };
  ttft prefill_ttft(double threshold, bool has_prfaas, bool has_pd_p) const;

  /// Eq. 2: egress of a fully busy PrfaaS cluster, (N/P)·Φ_kv(L_avg) in Gbit/s, with the
  /// workload's mean uncached length.
  double eq2_egress_gbps(uint32_t n_prfaas) const;

private:
  /// Per-request prefill time of bucket [lo, hi) of the support on `prof`.
  double bucket_time(const engine::profile& prof, const std::vector<double>& cum_t, size_t lo,
                     size_t hi, double mean_len) const;

  case_inputs in_;
  std::vector<double> cw_, cx_, ct_prfaas_, ct_pd_, cs_; // partial sums (weights, L, T, S)
  uint32_t bs_max_ = 0;
  double step_s_ = 0, per_decode_ = 0;
};

} // namespace prfaas::planner

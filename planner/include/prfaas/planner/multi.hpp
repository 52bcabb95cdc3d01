#pragma once

// The planner for M PrfaaS clusters and N PD clusters (paper §3.3: "several PrfaaS and
// local PD clusters, whose sizes and ratios are determined by hardware capabilities,
// network bandwidth, and request traffic").
//
// Each PD cluster j receives a fixed share w_j of the offered requests (Σ w = 1) and
// chooses its own threshold t_j and split N_p,j + N_d,j = N_j; its long requests
// (l > t_j, a share p_j) may go to any PrfaaS cluster i it has a link to. At a choice
// of every (t_j, split_j), the throughput is a linear program (solved with GLPK):
//
//   maximise Λ over Λ ≥ 0 and y_ij ≥ 0 (requests/s PD j sends to PrfaaS i), such that
//     Σ_i y_ij           = w_j · p_j · Λ                   every long request goes somewhere
//     w_j (1 − p_j) Λ    ≤ Θ_pd-p,j = N_p,j / T_j(l_short,j)            Eq. 4, per PD cluster
//     w_j Λ              ≤ Θ_pd-d,j                                    Eq. 5, per PD cluster
//     y_ij               ≤ B_ij / S_kv(l_long,j)                       Eq. 3's link term, per link
//     Σ_j y_ij · T_i(l_long,j) ≤ N_i                                 Eq. 3's compute, per PrfaaS
//
// With M = N = 1 it is Eq. 6 exactly (min of the four terms). Fairness is the fixed
// shares: Λ grows only while every PD cluster gets its share, so none starves. Beside Λ
// the plan reports the *surplus*: the most total requests/s the deployment carries with
// every cluster at least at its share of Λ (how much a cluster with headroom could take
// beyond its share).
//
// The search: Λ by bisection. At a candidate Λ each PD cluster takes its *least
// offload* for its share w_j·Λ: the fewest decode instances that carry it (Eq. 5), every
// other instance prefilling, and the largest t whose short requests those carry (Eq. 4).
// Offloading less never uses more of a shared PrfaaS cluster or link (both grow with
// what is offloaded), so if the LP cannot route the least offloads at Λ, no choice can:
// Λ is feasible exactly when it routes them. With one PD cluster this is the planner's
// own optimum (Table 6): there Λmax is where Eq. 7 balances the two prefill sides, and
// the least offload at Λmax is that t and split.
//
// "Never uses more" holds for the compute side as the paper's Eq. 3 prices it only when
// p·T(l_long) falls as t rises (true of the profiles here: their T is near-linear);
// multi_test checks the M = N = 1 case against the 2-D search.

#include "prfaas/planner/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::planner {

struct multi_inputs : workload_inputs { ///< one length law for every PD cluster
  struct prfaas_cluster {
    std::string name;
    cluster_spec spec;
  };
  struct pd_cluster {
    std::string name;
    cluster_spec spec; ///< needs a decode model
    double share = 0;  ///< of the offered requests (normalised; 0 everywhere = by instances)
  };
  struct link {
    size_t prfaas = 0, pd = 0; ///< indices into the two lists
    double gbps = 0;           ///< PrfaaS → PD egress, Gbit/s
  };
  std::string name;
  std::vector<prfaas_cluster> prfaas;
  std::vector<pd_cluster> pd;
  std::vector<link> links;
  /// Each PD cluster's offloads split over its links in proportion to their bandwidth
  /// (the schedulers' `link_split: rate`) instead of however the LP likes.
  bool split_by_rate = false;
};

/// One PD cluster's choice.
struct pd_choice {
  double threshold = 0; ///< tokens; l > t is offloaded
  uint32_t n_p = 0, n_d = 0;
};

/// The LP's answer at one choice of every PD cluster.
struct multi_point {
  std::vector<pd_choice> choice;
  double lambda = 0;         ///< total requests/s at the offered mix (Σ_j w_j Λ = Λ)
  double prefill_lambda = 0; ///< the same without the decode rows (what t is chosen by)
  double surplus_lambda = 0; ///< most total requests/s with every cluster ≥ its share of Λ
  struct pd_figures {
    double share = 0, p = 0, l_long = 0, l_short = 0;
    double lambda = 0; ///< w_j Λ
    double theta_pd_p = 0, theta_pd_d = 0;
    bool prefill_binding = false, decode_binding = false;
  };
  struct link_figures {
    double requests_per_s = 0; ///< y_ij at Λ
    double gbps = 0;           ///< the KV it carries
    double capacity_gbps = 0;
    bool binding = false;
  };
  struct prfaas_figures {
    double busy = 0; ///< share of its instances' time used at Λ
    bool binding = false;
  };
  std::vector<pd_figures> pd;
  std::vector<link_figures> links;
  std::vector<prfaas_figures> prfaas;
};

class multi_model {
public:
  /// Throws std::invalid_argument on an unusable input (no PD cluster, a PD profile
  /// without decode, a link naming no cluster, a negative share or bandwidth).
  explicit multi_model(multi_inputs in);

  const multi_inputs& inputs() const { return in_; }
  /// The LP at this choice (one per PD cluster).
  multi_point evaluate(const std::vector<pd_choice>& c) const;
  /// The one-cluster model of PrfaaS i and PD j (with their link's bandwidth, 0 if none).
  const throughput_model& pair(size_t i, size_t j) const {
    return pairs_[j * in_.prfaas.size() + i];
  }
  bool linked(size_t j) const;
  /// The LP's optimum: Λ (floor < 0), or the surplus with every cluster at least at its
  /// share of `floor`; without the decode rows when !decode. Fills `out`'s figures.
  double rate(const std::vector<pd_choice>& c, bool decode, double floor = -1,
              multi_point* out = nullptr) const;
  /// Each PD cluster's share of the offered requests (normalised).
  const std::vector<double>& shares() const { return share_; }
  /// The bandwidth between PrfaaS i and PD j (all their links), Gbit/s.
  double pair_gbps(size_t i, size_t j) const { return gbps_[j * in_.prfaas.size() + i]; }

private:
  multi_inputs in_;
  std::vector<double> share_;
  std::vector<double> gbps_; ///< index j·M + i: the bandwidth between the pair (all links)
  std::vector<throughput_model> pairs_; ///< index j·M + i
};

/// The plan: every PD cluster's threshold and split.
struct multi_plan {
  multi_point best;
  uint32_t rounds = 0; ///< bisection steps on Λ
};

multi_plan optimise_multi(const multi_model& m);

// The searches of planner.hpp on the LP, for a model of one PD cluster and the PrfaaS
// clusters it links to (what one PD cluster's scheduler re-plans with): with one link
// they are best_threshold and best_split of the one-cluster model.

/// At split (n_p, n_d): the t whose prefill capacity (the LP without the decode rows)
/// is highest, on the same grid and refinement as best_threshold, evaluated with every
/// row. Throws std::invalid_argument unless the model has exactly one PD cluster.
multi_point best_threshold(const multi_model& m, uint32_t n_p, uint32_t n_d);
/// The best Λ over N_p in [np_min, np_max] (N_p + N_d = the PD cluster's instances),
/// each at its best t; ties go to the higher prefill capacity.
multi_point best_split(const multi_model& m, uint32_t np_min, uint32_t np_max);

} // namespace prfaas::planner

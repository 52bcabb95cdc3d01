#include "prfaas/planner/multi.hpp"

#include <glpk.h>

#include "threshold_scan.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

namespace prfaas::planner {

namespace {

using glp_ptr = std::unique_ptr<glp_prob, decltype(&glp_delete_prob)>;

/// A sparse LP built row by row, then solved by GLPK's simplex (messages off).
class lp {
public:
  lp() : p_(glp_create_prob(), &glp_delete_prob) { glp_set_obj_dir(p_.get(), GLP_MAX); }

  /// A column in [lo, hi] (hi = HUGE_VAL: no upper bound) with objective coefficient `obj`.
  int col(double lo, double hi, double obj) {
    const int c = glp_add_cols(p_.get(), 1);
    const int kind = hi == HUGE_VAL ? GLP_LO : hi <= lo ? GLP_FX : GLP_DB;
    glp_set_col_bnds(p_.get(), c, kind, lo, hi <= lo ? lo : hi);
    glp_set_obj_coef(p_.get(), c, obj);
    return c;
  }
  /// Σ coef·x = rhs (equal) or ≤ rhs.
  int row(const std::vector<std::pair<int, double>>& terms, double rhs, bool equal) {
    const int r = glp_add_rows(p_.get(), 1);
    glp_set_row_bnds(p_.get(), r, equal ? GLP_FX : GLP_UP, rhs, rhs);
    for (auto& [c, v] : terms) {
      ia_.push_back(r);
      ja_.push_back(c);
      ar_.push_back(v);
    }
    return r;
  }
  bool solve() {
    glp_load_matrix(p_.get(), static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data());
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    return glp_simplex(p_.get(), &parm) == 0 && glp_get_status(p_.get()) == GLP_OPT;
  }
  double objective() const { return glp_get_obj_val(p_.get()); }
  double value(int c) const { return glp_get_col_prim(p_.get(), c); }
  double activity(int r) const { return glp_get_row_prim(p_.get(), r); }

private:
  glp_ptr p_;
  std::vector<int> ia_{0}, ja_{0}; // GLPK's arrays are 1-based
  std::vector<double> ar_{0};
};

bool at_bound(double activity, double bound) {
  return bound <= 0 ? activity >= -1e-12 : activity >= bound * (1 - 1e-9);
}

} // namespace

multi_model::multi_model(multi_inputs in) : in_(std::move(in)) {
  if (in_.pd.empty())
    throw std::invalid_argument("planner: no PD cluster");
  if (in_.prfaas.empty())
    throw std::invalid_argument("planner: no PrfaaS cluster");
  double total = 0, instances = 0;
  for (auto& c : in_.pd) {
    if (c.share < 0)
      throw std::invalid_argument("planner: PD cluster " + c.name + " has a negative share");
    total += c.share;
    instances += c.spec.instances;
  }
  for (auto& c : in_.pd)
    share_.push_back(total > 0 ? c.share / total : c.spec.instances / instances);
  auto& gbps = gbps_;
  gbps.assign(in_.prfaas.size() * in_.pd.size(), 0);
  for (auto& l : in_.links) {
    if (l.prfaas >= in_.prfaas.size() || l.pd >= in_.pd.size())
      throw std::invalid_argument("planner: a link names a cluster that is not declared");
    if (!(l.gbps >= 0))
      throw std::invalid_argument("planner: a link's bandwidth must not be negative");
    gbps[l.pd * in_.prfaas.size() + l.prfaas] += l.gbps;
  }
  for (size_t j = 0; j < in_.pd.size(); ++j)
    for (size_t i = 0; i < in_.prfaas.size(); ++i) {
      case_inputs c;
      static_cast<workload_inputs&>(c) = in_;
      c.name = in_.prfaas[i].name + "->" + in_.pd[j].name;
      c.prfaas = in_.prfaas[i].spec;
      c.pd = in_.pd[j].spec;
      c.link_gbps = gbps[j * in_.prfaas.size() + i];
      pairs_.emplace_back(std::move(c));
    }
}

bool multi_model::linked(size_t j) const {
  for (auto& l : in_.links)
    if (l.pd == j && l.gbps > 0 && in_.prfaas[l.prfaas].spec.instances > 0)
      return true;
  return false;
}

namespace {

/// The LP of one choice, with the ids of what the figures read back.
struct program {
  lp p;
  std::vector<operating_point> op; ///< per PD cluster (p, l_long, Θ_pd-p, Θ_pd-d)
  std::vector<int> lam, pdp, pdd, comp, y;
  std::vector<double> link_cap; ///< requests/s each link carries at most
};

/// Builds the LP (the header's rows): Λ with every cluster at its share, or (floor ≥ 0)
/// the total with every cluster at least at its share of `floor`.
program build(const multi_model& m, const std::vector<pd_choice>& c, bool decode, double floor) {
  const auto& in = m.inputs();
  const size_t M = in.prfaas.size(), N = in.pd.size();
  const bool surplus = floor >= 0;
  program g;
  auto& p = g.p;
  const int big = surplus ? 0 : p.col(0, HUGE_VAL, 1);
  g.op.resize(N);
  g.lam.resize(N);
  for (size_t j = 0; j < N; ++j) {
    g.op[j] =
        m.pair(0, j).evaluate(c[j].threshold, in.prfaas[0].spec.instances, c[j].n_p, c[j].n_d);
    const double share = m.shares()[j];
    g.lam[j] = p.col(surplus ? share * floor * (1 - 1e-9) : 0, HUGE_VAL, surplus ? 1 : 0);
    if (!surplus)
      p.row({{g.lam[j], 1}, {big, -share}}, 0, true);
  }
  std::vector<std::vector<std::pair<int, double>>> flow(N), compute(M);
  std::vector<std::vector<std::pair<int, double>>> routable(N); ///< (y, Gbit/s) per PD cluster
  for (auto& l : in.links) {
    const auto o = m.pair(l.prfaas, l.pd)
                       .evaluate(c[l.pd].threshold, in.prfaas[l.prfaas].spec.instances, 0, 0);
    // Requests/s the link carries at most (Eq. 3's B / S_kv), and the share of PrfaaS
    // i's time one request/s takes (T_i / N_i).
    const double pair_gbps = m.pair_gbps(l.prfaas, l.pd);
    const double cap = o.p > 0 && pair_gbps > 0 ? o.theta_link * l.gbps / pair_gbps : 0;
    const double cost = o.theta_prfaas_compute > 0 ? 1 / o.theta_prfaas_compute : 0;
    const int v = p.col(0, cost > 0 ? cap : 0, 0);
    g.y.push_back(v);
    g.link_cap.push_back(cap);
    flow[l.pd].push_back({v, 1});
    if (cost > 0) {
      compute[l.prfaas].push_back({v, cost});
      if (cap > 0)
        routable[l.pd].push_back({v, l.gbps});
    }
  }
  // Split by rate: every link of a PD cluster carries the same requests per Gbit/s (its
  // requests all have that cluster's KV size, so its bytes follow the rates too).
  if (in.split_by_rate)
    for (auto& r : routable)
      for (size_t k = 1; k < r.size(); ++k)
        p.row({{r[k - 1].first, 1 / r[k - 1].second}, {r[k].first, -1 / r[k].second}}, 0, true);
  g.pdp.assign(N, 0);
  g.pdd.assign(N, 0);
  g.comp.assign(M, 0);
  for (size_t j = 0; j < N; ++j) {
    auto f = flow[j];
    f.push_back({g.lam[j], -g.op[j].p});
    p.row(f, 0, true);
    if (g.op[j].p < 1)
      g.pdp[j] = p.row({{g.lam[j], 1 - g.op[j].p}}, g.op[j].theta_pd_p, false);
    if (decode)
      g.pdd[j] = p.row({{g.lam[j], 1}}, g.op[j].theta_pd_d, false);
  }
  for (size_t i = 0; i < M; ++i)
    if (!compute[i].empty())
      g.comp[i] = p.row(compute[i], 1, false);
  return g;
}

/// The figures of a solved program.
void read_figures(const multi_model& m, const std::vector<pd_choice>& c, const program& g,
                  multi_point& out) {
  const auto& in = m.inputs();
  const auto& p = g.p;
  out.pd.assign(in.pd.size(), {});
  for (size_t j = 0; j < in.pd.size(); ++j) {
    auto& f = out.pd[j];
    const auto& op = g.op[j];
    f.share = m.shares()[j];
    f.p = op.p;
    f.l_long = op.l_long;
    f.l_short = op.l_short;
    f.lambda = p.value(g.lam[j]);
    f.theta_pd_p = op.theta_pd_p;
    f.theta_pd_d = op.theta_pd_d;
    f.prefill_binding = g.pdp[j] && at_bound(p.activity(g.pdp[j]), op.theta_pd_p);
    f.decode_binding = g.pdd[j] && at_bound(p.activity(g.pdd[j]), op.theta_pd_d);
  }
  out.links.assign(in.links.size(), {});
  for (size_t k = 0; k < in.links.size(); ++k) {
    auto& f = out.links[k];
    const auto& l = in.links[k];
    f.requests_per_s = p.value(g.y[k]);
    const auto o = m.pair(l.prfaas, l.pd).evaluate(c[l.pd].threshold, 1, 0, 0);
    f.capacity_gbps = l.gbps;
    // y · S_kv: the pair's links carry θ_link requests/s at their whole bandwidth.
    f.gbps = o.theta_link > 0 ? f.requests_per_s / o.theta_link * m.pair_gbps(l.prfaas, l.pd) : 0;
    f.binding = g.link_cap[k] > 0 && at_bound(f.requests_per_s, g.link_cap[k]);
  }
  out.prfaas.assign(in.prfaas.size(), {});
  for (size_t i = 0; i < in.prfaas.size(); ++i)
    if (g.comp[i]) {
      out.prfaas[i].busy = p.activity(g.comp[i]);
      out.prfaas[i].binding = at_bound(out.prfaas[i].busy, 1);
    }
}

} // namespace

double multi_model::rate(const std::vector<pd_choice>& c, bool decode, double floor,
                         multi_point* out) const {
  auto g = build(*this, c, decode, floor);
  if (!g.p.solve())
    return 0;
  if (out)
    read_figures(*this, c, g, *out);
  return std::max(0.0, g.p.objective());
}

multi_point multi_model::evaluate(const std::vector<pd_choice>& c) const {
  if (c.size() != in_.pd.size())
    throw std::invalid_argument("planner: one choice per PD cluster");
  multi_point out;
  out.choice = c;
  out.prefill_lambda = rate(c, false);
  out.lambda = rate(c, true, -1, &out);
  out.surplus_lambda = rate(c, true, out.lambda);
  return out;
}

namespace {

/// PD cluster j's least offload at rate `rate`: the fewest decode instances that carry it
/// (Eq. 5), every other instance prefilling, and the largest t whose short requests those
/// prefill instances still carry (Eq. 4; home load only grows with t). False when the
/// cluster cannot carry `rate` whatever it offloads.
bool least_offload(const multi_model& m, size_t j, double rate, pd_choice& out) {
  const auto& in = m.inputs();
  const auto& d = in.lengths;
  const uint32_t n = in.pd[j].spec.instances;
  const auto& pm = m.pair(0, j);
  const double per_decode = pm.decode_rate_per_instance();
  if (!(per_decode > 0))
    return false;
  const double need = std::ceil(rate / per_decode * (1 - 1e-12));
  const uint32_t n_d = static_cast<uint32_t>(std::max(1.0, need));
  const bool linked = m.linked(j);
  if (n_d > n || (n_d == n && !linked))
    return false;
  out.n_d = n_d;
  out.n_p = n - n_d;
  const double t_all = d.min() * (1 - 1e-9);
  auto home_ok = [&](double t) {
    const auto op = pm.evaluate(t, 0, out.n_p, out.n_d);
    return op.p >= 1 || rate * (1 - op.p) <= op.theta_pd_p * (1 + 1e-12);
  };
  if (out.n_p == 0) {
    out.threshold = t_all;
    return true;
  }
  if (home_ok(d.max())) { // everything stays home
    out.threshold = d.max();
    return true;
  }
  if (!linked)
    return false;
  double lo = std::log(d.min()), hi = std::log(d.max()); // home_ok(e^lo) holds, e^hi fails
  if (!home_ok(std::exp(lo)))
    lo = std::log(t_all);
  for (int i = 0; i < 100 && hi - lo > 1e-12; ++i) {
    const double mid = (lo + hi) / 2;
    (home_ok(std::exp(mid)) ? lo : hi) = mid;
  }
  out.threshold = std::exp(lo);
  return true;
}

/// Every PD cluster at its least offload for its share of `lambda`, and whether the
/// links and PrfaaS clusters carry what they offload.
bool feasible(const multi_model& m, double lambda, std::vector<pd_choice>& c) {
  c.assign(m.inputs().pd.size(), {});
  for (size_t j = 0; j < c.size(); ++j)
    if (!least_offload(m, j, m.shares()[j] * lambda, c[j]))
      return false;
  return m.rate(c, true) >= lambda * (1 - 1e-9);
}

} // namespace

multi_plan optimise_multi(const multi_model& m) {
  const auto& in = m.inputs();
  // Above any plan: every instance of a cluster decoding (Eq. 5) for its share.
  double hi = HUGE_VAL;
  for (size_t j = 0; j < in.pd.size(); ++j)
    hi = std::min(hi, in.pd[j].spec.instances * m.pair(0, j).decode_rate_per_instance() /
                          m.shares()[j]);
  double lo = 0;
  std::vector<pd_choice> c, best;
  multi_plan out;
  if (!feasible(m, lo, best))
    throw std::invalid_argument("planner: no plan carries any load");
  for (out.rounds = 0; out.rounds < 200 && hi - lo > 1e-10 * hi; ++out.rounds) {
    const double mid = (lo + hi) / 2;
    if (feasible(m, mid, c))
      lo = mid, best = c;
    else
      hi = mid;
  }
  out.best = m.evaluate(best);
  return out;
}

multi_point best_threshold(const multi_model& m, uint32_t n_p, uint32_t n_d) {
  if (m.inputs().pd.size() != 1)
    throw std::invalid_argument("planner: a threshold search needs exactly one PD cluster");
  const auto& d = m.inputs().lengths;
  auto at = [&](double t) { return std::vector<pd_choice>{{t, n_p, n_d}}; };
  // t just below the smallest length offloads everything; n_p = 0 allows nothing else.
  const double t_all = d.min() * (1 - 1e-9);
  double best_t = t_all;
  if (n_p > 0 && d.size() > 1) {
    double best = m.rate(at(t_all), false);
    detail::scan_log_thresholds(std::log(d.min()), std::log(d.max()),
                                std::max<uint32_t>(m.inputs().threshold_points, 8),
                                m.inputs().refine_rounds, [&](double u) {
                                  const double cap = m.rate(at(std::exp(u)), false);
                                  if (!(cap > best))
                                    return false;
                                  best = cap, best_t = std::exp(u);
                                  return true;
                                });
  }
  return m.evaluate(at(best_t));
}

multi_point best_split(const multi_model& m, uint32_t np_min, uint32_t np_max) {
  if (m.inputs().pd.size() != 1)
    throw std::invalid_argument("planner: a split search needs exactly one PD cluster");
  const uint32_t total = m.inputs().pd[0].spec.instances;
  multi_point best;
  bool have = false;
  for (uint32_t n_p = np_min; n_p <= np_max && n_p < total; ++n_p) {
    auto op = best_threshold(m, n_p, total - n_p);
    const bool better = !have || op.lambda > best.lambda ||
                        (op.lambda == best.lambda && op.prefill_lambda > best.prefill_lambda);
    if (better)
      best = std::move(op), have = true;
  }
  if (!have)
    throw std::invalid_argument("planner: no split in the range leaves a decode instance");
  return best;
}

} // namespace prfaas::planner

#include "prfaas/planner/report.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

namespace prfaas::planner {

namespace {

using nlohmann::json;

json num_or_null(bool applies, double v) {
  return applies ? json(v) : json(nullptr);
}

json plan_json(const plan& p, double link_gbps) {
  const auto& op = p.op;
  const bool has_prfaas = op.n_prfaas > 0, has_pd_p = op.n_p > 0;
  const bool split = has_prfaas && has_pd_p;
  return json{
      {"threshold_tokens", num_or_null(split, op.threshold)},
      {"n_prfaas", op.n_prfaas},
      {"n_p", op.n_p},
      {"n_d", op.n_d},
      {"p", op.p},
      {"l_long_tokens", num_or_null(has_prfaas, op.l_long)},
      {"l_short_tokens", num_or_null(has_pd_p, op.l_short)},
      {"theta_prfaas", num_or_null(has_prfaas, op.theta_prfaas)},
      {"theta_prfaas_compute", num_or_null(has_prfaas, op.theta_prfaas_compute)},
      {"theta_link", num_or_null(has_prfaas, op.theta_link)},
      {"theta_pd_p", num_or_null(has_pd_p, op.theta_pd_p)},
      {"theta_pd_d", op.theta_pd_d},
      {"lambda_max", op.lambda},
      {"binding", to_string(op.binding)},
      {"egress_gbps", num_or_null(has_prfaas, op.egress_gbps)},
      {"link_utilisation", num_or_null(has_prfaas, op.egress_gbps / link_gbps)},
      {"eq2_egress_gbps", num_or_null(has_prfaas, p.eq2_egress_gbps)},
      {"ttft_mean_s", p.ttft.mean_s},
      {"ttft_p90_s", p.ttft.p90_s},
  };
}

const char* form_name(prefill_time_form f) {
  return f == prefill_time_form::mean_length ? "mean_length" : "expected_time";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

} // namespace

nlohmann::json to_json(const throughput_model& m, const plan_report& r, const planner_config& cfg) {
  const auto& in = m.inputs();
  json out{
      {"name", in.name},
      {"config", cfg.path},
      {"workload",
       {{"input_lengths", in.lengths.description()},
        {"mean_input_tokens", in.lengths.mean()},
        {"output_tokens", in.output_tokens},
        {"decode_slo_tokens_per_s", in.slo_tokens_per_s},
        {"prefill_time", form_name(in.form)}}},
      {"clusters",
       {{"prfaas", {{"profile", in.prfaas.profile.name}, {"instances", in.prfaas.instances}}},
        {"pd", {{"profile", in.pd.profile.name}, {"instances", in.pd.instances}}},
        {"homogeneous_instances", in.homogeneous_instances}}},
      {"link_gbps", in.link_gbps},
      {"decode",
       {{"bs_max", m.bs_max()},
        {"step_s", m.decode_step_s()},
        {"per_instance_req_s", m.decode_rate_per_instance()}}},
      {"plans",
       {{"prfaas_pd", plan_json(r.prfaas_pd, in.link_gbps)},
        {"homogeneous_pd", plan_json(r.homogeneous, in.link_gbps)},
        {"naive_heterogeneous", plan_json(r.naive, in.link_gbps)}}},
      {"ratios",
       {{"prfaas_over_homogeneous", r.ratio_vs_homogeneous()},
        {"prfaas_over_naive", r.ratio_vs_naive()},
        {"naive_over_homogeneous", r.naive.op.lambda / r.homogeneous.op.lambda}}},
  };
  if (!cfg.reference.empty()) {
    out["reference"] = cfg.reference;
    out["reference_source"] = cfg.reference_source;
  }
  return out;
}

namespace {

/// The config's reference figure `key` of plan `p`, if it has one.
std::optional<double> reference(const planner_config& cfg, const plan& p, const char* key) {
  const auto it = cfg.reference.find(p.kind);
  if (it == cfg.reference.end())
    return std::nullopt;
  const auto f = it->second.find(key);
  return f == it->second.end() ? std::nullopt : std::optional<double>(f->second);
}

/// Below the table: the Λ ratios (beside the reference's) and the workload line.
void table_footer(std::ostream& o, const throughput_model& m, const plan_report& r,
                  const planner_config& cfg) {
  const auto& in = m.inputs();
  const bool with_ref = !cfg.reference.empty();
  auto ratio = [&](const char* label, double ours, const plan& other) {
    o << label << fmt("%.2fx", ours);
    if (with_ref)
      if (auto a = reference(cfg, r.prfaas_pd, "lambda_max"),
          b = reference(cfg, other, "lambda_max");
          a && b)
        o << " (paper " << fmt("%.2fx", *a / *b) << ")";
    o << "\n";
  };
  ratio("Lambda ratio PrfaaS-PD / homogeneous PD: ", r.ratio_vs_homogeneous(), r.homogeneous);
  ratio("Lambda ratio PrfaaS-PD / naive heterogeneous: ", r.ratio_vs_naive(), r.naive);
  o << "\nworkload: " << in.lengths.description() << ", mean " << fmt("%.0f", in.lengths.mean())
    << " tokens; L_out " << in.output_tokens << "; SLO " << fmt("%.0f", in.slo_tokens_per_s)
    << " tok/s (BS_max " << m.bs_max() << ", step " << fmt("%.1f", m.decode_step_s() * 1e3)
    << " ms); link " << fmt("%.0f", in.link_gbps) << " Gbps; prefill time form "
    << form_name(in.form) << "\n";
  if (with_ref && !cfg.reference_source.empty())
    o << "paper columns: " << cfg.reference_source << "\n";
}

} // namespace

std::string render_table(const throughput_model& m, const plan_report& r,
                         const planner_config& cfg) {
  const plan* plans[] = {&r.prfaas_pd, &r.homogeneous, &r.naive};
  const char* titles[] = {"PrfaaS-PD", "homogeneous PD", "naive hetero"};
  const bool with_ref = !cfg.reference.empty();
  auto ref = [&](const plan& p, const char* key) { return reference(cfg, p, key); };
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s", "");
  o << line;
  for (const char* t : titles) {
    std::snprintf(line, sizeof line, with_ref ? "| %-14s %-9s" : "| %-14s", t,
                  with_ref ? "paper" : "");
    o << line;
  }
  o << "\n" << std::string(28 + (with_ref ? 26 : 16) * 3, '-') << "\n";
  // One row: our value per plan (empty when n/a) and the reference figure beside it.
  auto row = [&](const char* label, const char* key, const char* f,
                 auto&& value /* (const plan&) -> std::optional<double> */) {
    std::snprintf(line, sizeof line, "%-28s", label);
    o << line;
    for (const plan* p : plans) {
      const auto v = value(*p);
      const auto rv = ref(*p, key);
      std::snprintf(line, sizeof line, "| %-14s", v ? fmt(f, *v).c_str() : "-");
      o << line;
      if (with_ref) {
        std::snprintf(line, sizeof line, " %-9s", rv ? fmt(f, *rv).c_str() : "-");
        o << line;
      }
    }
    o << "\n";
  };
  using opt = std::optional<double>;
  auto when = [](bool b, double v) { return b ? opt(v) : std::nullopt; };
  row("threshold t (tokens)", "threshold_tokens", "%.0f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0 && p.op.n_p > 0, p.op.threshold); });
  row("N_prfaas", "n_prfaas", "%.0f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0, p.op.n_prfaas); });
  row("N_p", "n_p", "%.0f", [&](const plan& p) { return when(p.op.n_p > 0, p.op.n_p); });
  row("N_d", "n_d", "%.0f", [&](const plan& p) { return opt(p.op.n_d); });
  row("p = P(L > t)", "p", "%.3f", [&](const plan& p) { return opt(p.op.p); });
  row("l_long = E[L|L>t] (tokens)", "l_long_tokens", "%.0f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0, p.op.l_long); });
  row("Theta_prfaas (req/s)", "theta_prfaas", "%.2f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0, p.op.theta_prfaas); });
  row("Theta_pd-p (req/s)", "theta_pd_p", "%.2f",
      [&](const plan& p) { return when(p.op.n_p > 0, p.op.theta_pd_p); });
  row("Theta_pd-d (req/s)", "theta_pd_d", "%.2f",
      [&](const plan& p) { return opt(p.op.theta_pd_d); });
  row("Lambda_max (req/s)", "lambda_max", "%.2f", [&](const plan& p) { return opt(p.op.lambda); });
  row("egress sent at Lambda (Gbps)", "egress_gbps", "%.1f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0, p.op.egress_gbps); });
  row("Eq.2 egress (N/P)Phi(L_avg)", "", "%.1f",
      [&](const plan& p) { return when(p.op.n_prfaas > 0, p.eq2_egress_gbps); });
  row("mean TTFT, prefill only (s)", "ttft_mean_s", "%.2f",
      [&](const plan& p) { return opt(p.ttft.mean_s); });
  row("P90 TTFT, prefill only (s)", "ttft_p90_s", "%.2f",
      [&](const plan& p) { return opt(p.ttft.p90_s); });
  std::snprintf(line, sizeof line, "%-28s", "binding constraint");
  o << line;
  for (const plan* p : plans) {
    std::snprintf(line, sizeof line, with_ref ? "| %-24s" : "| %-14s",
                  to_string(p->op.binding).c_str());
    o << line;
  }
  o << "\n\n";
  table_footer(o, m, r, cfg);
  return o.str();
}

} // namespace prfaas::planner

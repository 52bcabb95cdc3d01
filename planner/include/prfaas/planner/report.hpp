#pragma once

#include "prfaas/planner/config.hpp"
#include "prfaas/planner/planner.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace prfaas::planner {

/// One JSON object: inputs summary, the three plans (keys "prfaas_pd", "homogeneous_pd",
/// "naive_heterogeneous"), the ratios and the config's reference figures. Figures that do
/// not apply to a plan (Θ_prfaas without a PrfaaS cluster, t of a baseline) are null.
/// Units: tokens, requests/s, Gbit/s, seconds.
nlohmann::json to_json(const throughput_model& m, const plan_report& r, const planner_config& cfg);

/// A human-readable table: the three plans side by side, each beside its reference
/// column when the config has one, then the ratios.
std::string render_table(const throughput_model& m, const plan_report& r,
                         const planner_config& cfg);

/// The M × N plan as one JSON object: Λ, the prefill side, the surplus and the bisection
/// steps; per PD cluster
/// its share, t, split, p, rate and binding terms; per link its capacity, the requests/s
/// and Gbit/s of KV it carries and whether it binds; per PrfaaS cluster its busy share.
nlohmann::json to_json(const multi_model& m, const multi_plan& p, const multi_config& cfg);
/// The same as tables.
std::string render_table(const multi_model& m, const multi_plan& p, const multi_config& cfg);

} // namespace prfaas::planner

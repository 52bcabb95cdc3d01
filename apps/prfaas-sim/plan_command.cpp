#include "plan_command.hpp"

#include "prfaas/planner/config.hpp"
#include "prfaas/planner/planner.hpp"
#include "prfaas/planner/report.hpp"

#include <iostream>

namespace prfaas::sim {

CLI::App* add_plan_command(CLI::App& app, plan_options& opts) {
  auto* plan = app.add_subcommand(
      "plan", "throughput-optimal threshold and PD split (Eq. 3-8) with the homogeneous and "
              "naive baselines");
  plan->add_option("--config", opts.config, "planner config (e.g. configs/paper-case-study.yaml)")
      ->required();
  plan->add_flag("--json", opts.json, "print one JSON object instead of the table");
  return plan;
}

namespace {

/// One JSON object or the table, for either config shape.
template <class Model, class Plan, class Config>
void print(const plan_options& opts, const Model& model, const Plan& plan, const Config& cfg) {
  if (opts.json)
    std::cout << planner::to_json(model, plan, cfg).dump(2) << "\n";
  else
    std::cout << planner::render_table(model, plan, cfg);
}

} // namespace

int run_plan(const plan_options& opts) {
  try {
    if (planner::is_multi_config(opts.config)) {
      const auto cfg = planner::load_multi_config(opts.config);
      const planner::multi_model model(cfg.inputs);
      print(opts, model, planner::optimise_multi(model), cfg);
      return 0;
    }
    const auto cfg = planner::load_config(opts.config);
    const planner::throughput_model model(cfg.inputs);
    print(opts, model, planner::plan_all(model), cfg);
    return 0;
  } catch (const planner::config_error& e) {
    std::cerr << "prfaas-sim plan: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "prfaas-sim plan: " << e.what() << "\n";
    return 1;
  }
}

} // namespace prfaas::sim

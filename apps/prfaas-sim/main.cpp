// prfaas-sim: analysis and simulation of a PrfaaS deployment.
//   prfaas-sim plan --config FILE [--json]   the Eq. 3-8 planner and its baselines
// Each subcommand lives in its own <name>_command.{hpp,cpp}.

#include "plan_command.hpp"

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"prfaas-sim: plan (and, later, simulate) a PrfaaS deployment"};
  app.require_subcommand(1);
  prfaas::sim::plan_options plan_opts;
  auto* plan = prfaas::sim::add_plan_command(app, plan_opts);
  CLI11_PARSE(app, argc, argv);
  if (*plan)
    return prfaas::sim::run_plan(plan_opts);
  return 0;
}

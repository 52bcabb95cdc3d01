// prfaas-sim: analysis and simulation of a PrfaaS deployment.
//   prfaas-sim plan --config FILE [--json]   the Eq. 3-8 planner and its baselines
//   prfaas-sim cache-replay --config FILE    prefix-cache hit ratios of the routing policies
// Each subcommand lives in its own <name>_command.{hpp,cpp}.

#include "cache_replay_command.hpp"
#include "plan_command.hpp"

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"prfaas-sim: plan (and, later, simulate) a PrfaaS deployment"};
  app.require_subcommand(1);
  prfaas::sim::plan_options plan_opts;
  auto* plan = prfaas::sim::add_plan_command(app, plan_opts);
  prfaas::sim::cache_replay_options replay_opts;
  auto* replay = prfaas::sim::add_cache_replay_command(app, replay_opts);
  CLI11_PARSE(app, argc, argv);
  if (*plan)
    return prfaas::sim::run_plan(plan_opts);
  if (*replay)
    return prfaas::sim::run_cache_replay(replay_opts);
  return 0;
}

// prfaas-sim: analysis and simulation of a PrfaaS deployment.
//   prfaas-sim plan --config FILE [--json]   the Eq. 3-8 planner and its baselines
//   prfaas-sim cache-replay --config FILE    prefix-cache hit ratios of the routing policies
//   prfaas-sim run --config FILE --seed N ... a deployment in virtual time (real actors)
//   prfaas-sim search --config FILE ...      its maximum sustainable rate under the SLO
//   prfaas-sim chaos --config FILE ...       the deterministic chaos sweep (invariants checked)
// Each subcommand lives in its own <name>_command.{hpp,cpp}.

#include "cache_replay_command.hpp"
#include "chaos_command.hpp"
#include "plan_command.hpp"
#include "run_command.hpp"
#include "search_command.hpp"

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"prfaas-sim: plan, simulate and chaos-test a PrfaaS deployment"};
  app.require_subcommand(1);
  prfaas::sim::plan_options plan_opts;
  auto* plan = prfaas::sim::add_plan_command(app, plan_opts);
  prfaas::sim::cache_replay_options replay_opts;
  auto* replay = prfaas::sim::add_cache_replay_command(app, replay_opts);
  prfaas::sim::run_options run_opts;
  auto* run = prfaas::sim::add_run_command(app, run_opts);
  prfaas::sim::search_options search_opts;
  auto* search = prfaas::sim::add_search_command(app, search_opts);
  prfaas::sim::chaos_options chaos_opts;
  auto* chaos = prfaas::sim::add_chaos_command(app, chaos_opts);
  CLI11_PARSE(app, argc, argv);
  if (*plan)
    return prfaas::sim::run_plan(plan_opts);
  if (*replay)
    return prfaas::sim::run_cache_replay(replay_opts);
  if (*run)
    return prfaas::sim::run_run(run_opts);
  if (*search)
    return prfaas::sim::run_search(search_opts);
  if (*chaos)
    return prfaas::sim::run_chaos(chaos_opts);
  return 0;
}

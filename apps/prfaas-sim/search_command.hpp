#pragma once

// `prfaas-sim search`: the maximum sustainable arrival rate of a deployment, found by
// bisection over Poisson arrival rates, each rate one `prfaas-sim run` with the same
// seed (so every trial sees the same prompt lengths). A rate is sustainable when
//  * at least `slo_fraction` of its requests completed with TPOT within the SLO, and
//  * its queues were stable: the mean TTFT of the last quarter of the requests is at
//    most `growth` × that of the second quarter + `slack_s` (a growing queue shows up
//    as TTFT that keeps rising over the run).

#include <CLI/CLI.hpp>

#include "run_command.hpp"

namespace prfaas::sim {

struct search_options {
  run_options run;
  double lo = 0.5, hi = 8; ///< req/s bracket
  int iterations = 7;
  double slo_fraction = 0.99;
  double growth = 1.5;
  double slack_s = 1.0;
  std::string json_out;
};

CLI::App* add_search_command(CLI::App& app, search_options& opts);
int run_search(const search_options& opts);

/// Whether one run's result is sustainable (and why not), per the rule above.
struct verdict {
  bool ok = false;
  std::string why;
};
verdict judge(const nlohmann::json& run, const std::vector<double>& ttft_by_arrival,
              const search_options& o);

} // namespace prfaas::sim

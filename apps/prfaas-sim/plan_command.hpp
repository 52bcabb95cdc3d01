#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace prfaas::sim {

/// Options of `prfaas-sim plan`.
struct plan_options {
  std::string config;
  bool json = false;
};

/// Registers `plan` on `app`; returns the subcommand so main can tell whether it ran.
CLI::App* add_plan_command(CLI::App& app, plan_options& opts);

/// Runs the planner on the config and prints a table or one JSON object. Exit codes:
/// 0 ok, 2 bad config (the message on stderr names the key).
int run_plan(const plan_options& opts);

} // namespace prfaas::sim

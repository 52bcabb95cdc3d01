#pragma once

// The scheduler's long-term controller (paper §3.4.3), in one place: online
// re-planning (replanner.hpp: the planner on the observed window moves the planned t
// and the target P/D split) and P/D conversion (role_controller.hpp: drains and
// switches convertible PD nodes, toward the plan's split when there is one, else by the
// stages' loads). Both are optional and off by default (replan_interval and
// convert_interval 0). Metrics and logs of both are written here.

#include <chrono>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "scheduler/policy.hpp"
#include "scheduler/replanner.hpp"
#include "scheduler/role_controller.hpp"

namespace prfaas::serving {

/// The planned-threshold gauge (set at start to the configured t, then by re-plans).
prometheus::Gauge& planned_threshold_gauge(metrics& m);

class long_term {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// From the scheduler's parameters. Re-planning needs prefill timings for both sides
  /// (the PrfaaS workers' profile and the PD cluster's) and a decode model on the PD
  /// one; check_deployment refuses a deployment without them.
  /// `own_cluster`: the scheduler's PD cluster (with several links, whose share of each
  /// PrfaaS cluster a re-plan counts on).
  long_term(const actor_params& p, const deployment_config& dep, const cluster_view& v,
            const std::string& own_cluster, spdlog::logger& log);
  /// With replan_interval set: both sides' profiles are declared, load, and have what
  /// the planner needs. Throws config_error naming replan_interval.
  static void check_deployment(const actor_params& p, const deployment_config& dep,
                               const cluster_view& v);

  /// A routed request (for the re-planner's window).
  void observe(time_point now, const route_choice& c, uint32_t output_tokens);
  /// Once per load interval: re-plans when due (the policy takes a new planned t),
  /// then converts toward the split.
  void tick(time_point now, cluster_view& v, routing_policy& policy, metrics& m,
            spdlog::logger& log);

  /// The scheduler's parameters of both controllers (name, kind, default, help).
  static std::vector<param_spec> params();
  /// Each against its rule; throws config_error naming the key.
  static void check(const std::string& path, const actor_params& p);

private:
  void converted(cluster_view& v, metrics& m, spdlog::logger& log, time_point now);
  void report(const replanner::decision& d, metrics& m, spdlog::logger& log);

  std::optional<role_controller> roles_;
  std::optional<replanner> plan_;
  std::string last_reason_;
};

} // namespace prfaas::serving

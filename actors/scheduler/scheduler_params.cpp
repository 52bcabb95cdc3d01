#include "scheduler/scheduler_params.hpp"

#include "prfaas/runtime/settings_schema.hpp"
#include "scheduler/long_term.hpp"
#include "scheduler/policy.hpp"
#include "scheduler/prfaas_policy.hpp"
#include "scheduler/threshold_controller.hpp"

namespace prfaas::serving {

namespace {

/// The policies' knobs whose defaults live in their settings structs.
struct scheduler_knobs {
  threshold_controller::settings control;
  bandwidth_mode::bounds bounds;
};

} // namespace

// Routing and the short-term controller here, the long-term controller's in
// long_term.cpp. The policies read their knobs by name (a plugin's policy too); the
// registry fills in these defaults first.
std::vector<param_spec> scheduler_params() {
  // Defaults the controllers' own settings structs carry are rendered from them.
  const scheduler_knobs d{};
  auto shown = [](param_kind k, const auto& v) { return detail::render_default(k, v); };
  std::string policies;
  for (auto& n : policy_registry::instance().names())
    policies += (policies.empty() ? "" : ", ") + n;
  std::vector<param_spec> out{
      {"policy", param_kind::string, "threshold",
       "routing policy by name: " + policies + " (plugins may register more)"},
      {"threshold", param_kind::integer, shown(param_kind::integer, d.control.planned),
       "policy threshold: offload prompts longer than this many uncached tokens"},
      {"load_interval", param_kind::duration, "100ms", "how often workers' load is polled"},
      {"route_grace", param_kind::duration, "20ms",
       "a route stays counted against its worker until a load report polled this "
       "long after it (the order may still be on its way from the gateway)"},
      {"scarce_utilisation", param_kind::number,
       shown(param_kind::number, d.bounds.scarce_utilisation),
       "prfaas policy: link utilisation at which bandwidth becomes scarce"},
      {"abundant_utilisation", param_kind::number,
       shown(param_kind::number, d.bounds.abundant_utilisation),
       "prfaas policy: ... and abundant again (with the queue below its bound)"},
      {"scarce_queue_tokens", param_kind::integer,
       shown(param_kind::integer, d.bounds.scarce_queue_tokens),
       "prfaas policy: PrfaaS prefill queue (tokens) at which bandwidth is scarce"},
      {"abundant_queue_tokens", param_kind::integer,
       shown(param_kind::integer, d.bounds.abundant_queue_tokens),
       "prfaas policy: ... and abundant again"},
      {"max_threshold", param_kind::integer, "0",
       "prfaas policy: the short-term controller never raises t above this (0 = no bound)"},
      {"min_threshold", param_kind::integer, shown(param_kind::integer, d.control.min),
       "prfaas policy: balancing never lowers t below this"},
      {"balance_ratio", param_kind::number, shown(param_kind::number, d.control.balance_ratio),
       "prfaas policy: t moves when one cluster's prefill wait (the PrfaaS side's "
       "including the link backlog) exceeds this many times the other's (0 = no balancing)"},
      {"balance_slack", param_kind::duration, "2s", "prfaas policy: ... and by more than this"},
      {"balance_step", param_kind::number, shown(param_kind::number, d.control.balance_step),
       "prfaas policy: balancing divides or multiplies t by this, once per retune_interval"},
      {"target_utilisation", param_kind::number,
       shown(param_kind::number, d.control.target_utilisation),
       "prfaas policy: share of the usable link bandwidth a re-searched t aims at"},
      {"control_window", param_kind::duration, shown(param_kind::duration, d.control.window),
       "prfaas policy: recent requests whose lengths the re-search uses"},
      {"retune_interval", param_kind::duration,
       shown(param_kind::duration, d.control.retune_interval),
       "prfaas policy: least time between two moves of t (a re-search or a balancing step)"},
      {"backlog_horizon", param_kind::duration, "1s",
       "prfaas policy: a link backlog needing this long to drain at the measured rate counts "
       "as full utilisation"},
      {"move_caches", param_kind::boolean, "true",
       "prfaas policy: while bandwidth is abundant, a prompt's best cache in the other "
       "cluster is moved to the prefill worker chosen for it"},
      {"offload", param_kind::string, "threshold",
       "prfaas policy: what decides where a prefill runs: threshold (offload iff the "
       "uncached length exceeds t) or cost (the worker, either cluster, expected to have "
       "the KV at the decode side soonest; t decides while the link is the bottleneck "
       "or a cluster has no measured pace)"},
      {"link_split", param_kind::string, "soonest",
       "prfaas policy, several links: where an offload goes: soonest (the PrfaaS worker "
       "whose KV would be ready first over its own link) or rate (the links take offloads' "
       "KV in proportion to their rates, the soonest worker behind the chosen link; with "
       "offload: cost, only while t decides)"},
      {"load_weight", param_kind::number, "1.0",
       "cache-aware placement: cost of one pending token against one uncached token"},
      {"decode_weight", param_kind::number, "512",
       "kv_router policy: cost of one sequence decoding on a prefill worker's node, in "
       "uncached tokens"},
      {"directory", param_kind::string, "\"\"",
       "KV directory to ask for prefix matches (node/actor or a local name); empty = "
       "cache-blind"},
      {"directory_timeout", param_kind::duration, "20ms",
       "how long a route waits for the directory before going cache-blind"},
      {"prefill_types", param_kind::string, "prefill_worker",
       "actor types that are prefill workers (comma-separated)"},
      {"decode_types", param_kind::string, "decode_worker",
       "actor types that are decode workers (comma-separated)"}};
  auto more = long_term::params();
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

} // namespace prfaas::serving

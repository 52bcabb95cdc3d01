#pragma once

// `prfaas-sim run`: one simulated run of a deployment under a workload, in virtual
// time, with the real actors (sim_world.hpp). Everything random comes from --seed, so
// the same command gives byte-identical JSON.

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prfaas/runtime/config.hpp"

namespace prfaas::sim {

struct run_options {
  std::string config;                 ///< deployment file (prfaas-node schema)
  std::string workload = "lognormal"; ///< lognormal | trace
  std::string trace;                  ///< Mooncake JSONL (workload trace)
  double trace_time_scale = 1.0;
  double trace_input_scale = 1.0;
  uint64_t seed = 1;
  std::string arrivals = "poisson"; ///< poisson | bursty | mmpp
  double rate = 1.0;                ///< req/s (bursty: during a burst)
  double burst_on_s = 30, burst_off_s = 30;
  std::vector<double> mmpp_rates{2.0, 0.5}, mmpp_dwell_s{30, 30};
  size_t requests = 0;
  double duration_s = 0;
  uint32_t output_tokens = 1024; ///< fixed output length (0 = the trace's)
  /// Input lengths of the lognormal workload: the paper's truncated log-normal by default.
  double input_mu = 9.90, input_sigma = 1.00, input_min = 128, input_max = 128 * 1024;
  /// "T:MU" — from T seconds on, lognormal input lengths with this mu.
  std::vector<std::string> input_phases;
  /// "T:GBPS" — every cross-cluster link's capacity becomes GBPS at T seconds.
  std::vector<std::string> bandwidth_steps;
  /// "T:SECONDS[:A,B]" — every cross-cluster link (or the one between clusters A and B)
  /// is down from T for SECONDS.
  std::vector<std::string> link_downs;
  double sample_interval_s = 5;
  double warmup_s = 2;      ///< before the first arrival (membership settles)
  double drain_s = 900;     ///< after the last arrival, at most
  double tpot_slo_ms = 25;  ///< 40 tokens/s
  std::string gateway;      ///< node/actor or "all"; default: the first gateway
  std::string json_out;     ///< "-" or empty = stdout
  std::string requests_csv; ///< per-request results, optional
  /// "fluid": the fluid link model (scale runs); "real": the live data plane's sender
  /// and receiver over simulated frames (slower: every chunk is an event).
  std::string data_plane = "fluid";
  /// The simulated nodes' logs (stderr, stamped with virtual seconds); off by default.
  log_level log = log_level::off;
};

CLI::App* add_run_command(CLI::App& app, run_options& opts);
/// Adds the options shared by `run` and `search` to `cmd`.
void add_run_options(CLI::App& cmd, run_options& opts);

/// One run; the result JSON (summary, stages, time series). Throws on bad input
/// (config_error, std::invalid_argument) with a message naming it.
/// `ttft_by_arrival`, when given, receives every request's TTFT (s; failed ones count
/// as their time to failure) in arrival order.
nlohmann::json simulate(const run_options& opts, std::vector<double>* ttft_by_arrival = nullptr);

/// Runs `body`; a config_error or std::invalid_argument is printed (naming what is
/// wrong) and turns into false.
bool report_bad_input(const std::function<void()>& body);
/// Writes `out` to `path` ("-" or empty: stdout); false (with a message) when it cannot.
bool write_json(const nlohmann::json& out, const std::string& path);

/// The CLI entry: runs, writes the JSON. Exit codes 0 ok, 2 bad input.
int run_run(const run_options& opts);

} // namespace prfaas::sim

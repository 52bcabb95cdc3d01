#pragma once

// prfaas-bench serve: drives the OpenAI-compatible HTTP API with a synthetic or
// trace-replay workload and reports latency, throughput, goodput under SLOs and the
// runtime's own overhead.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace prfaas::bench {

/// Every option of `serve`; the defaults are the paper's workload.
struct serve_options {
  // Server.
  std::string url = "http://127.0.0.1:8000";
  std::string endpoint = "completions"; ///< completions | chat
  std::string model;                    ///< empty: the first of GET /v1/models
  bool stream = true;
  double temperature = 0;
  std::string stop; ///< sent as "stop" when not empty

  // Workload.
  std::string workload = "lognormal"; ///< lognormal | fixed | trace
  std::string trace;
  uint32_t input_len = 1024; ///< --workload fixed
  double input_mu = 9.90, input_sigma = 1.00, input_min = 128, input_max = 131072;
  std::string output_dist = "fixed"; ///< fixed | lognormal
  uint32_t output_len = 1024;
  bool output_len_given = false; ///< trace: replaces the trace's output lengths
  double output_mu = 6.0, output_sigma = 1.0, output_min = 1, output_max = 4096;
  std::string arrival = "poisson"; ///< poisson | bursty | mmpp | closed
  double rate = 1.0;
  double burst_on_s = 10, burst_off_s = 10;
  std::vector<double> mmpp_rates{2.0, 0.5}, mmpp_dwell_s{10, 10};
  size_t concurrency = 1;
  /// closed: stream k starts at k·ramp_up_s/concurrency, not all at once (identical
  /// requests started together stay in lock-step and queue behind each other).
  double ramp_up_s = 0;
  size_t requests = 0; ///< 0: 100 synthetic, the whole trace
  double duration_s = 0;
  uint64_t seed = 1;
  double time_scale = 1.0, input_scale = 1.0;
  uint32_t max_input = 0, max_output = 0;

  // Client.
  size_t max_in_flight = 256;
  double timeout_s = 600;
  double slo_ttft_ms = 0; ///< 0: no TTFT bound
  double slo_tpot_ms = 25;
  std::string json; ///< file, or "-" for stdout
  bool per_request = false;
  /// With per_request: each request's prompt, sampling and output token ids, for a
  /// checker comparing them with what an undisturbed engine gives.
  bool record_tokens = false;
  bool progress = false;
};

/// The run's configuration as its JSON report records it (`model`: the one served).
nlohmann::json serve_config_json(const serve_options& o, const std::string& model);

/// Adds serve's options to `sub`, writing into `o`.
void add_serve_options(CLI::App& sub, serve_options& o);

/// Runs the benchmark; 0 when it ran (whatever the requests' outcomes), 1 when it
/// could not start (bad options, unreadable trace, no model to use).
int run_serve_bench(const serve_options& o);

} // namespace prfaas::bench

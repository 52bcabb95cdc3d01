#pragma once

// What a run measured: one request_result per request, and the run_summary made from
// them (latency percentiles, throughput, goodput under SLOs, the runtime's own
// overhead, errors by kind, the route split).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/openai.hpp"

namespace prfaas::loadgen {

enum class outcome {
  ok,
  http_error,       ///< a non-200 status
  stream_error,     ///< an error event in the stream
  bad_response,     ///< a malformed or truncated response
  timeout,          ///< past --timeout
  connection_error, ///< could not connect, or the connection broke
  cancelled,        ///< the run was interrupted
  client_saturated, ///< never sent: all --max-in-flight slots were busy at its arrival
};

std::string to_string(outcome o);

/// One request as the client saw it. Times are seconds.
struct request_result {
  uint64_t index = 0;
  uint32_t input_tokens = 0;
  uint32_t requested_output_tokens = 0;
  outcome status = outcome::ok;
  int http_status = 0;          ///< 0 when no response arrived
  std::string error;            ///< human-readable, empty when ok
  double scheduled_s = 0;       ///< arrival time in the workload
  double sent_s = 0;            ///< when it was sent, from the start of the run
  std::optional<double> ttft_s; ///< streaming only
  double e2e_s = 0;
  uint32_t output_tokens = 0;
  prfaas_info prfaas;
  /// What a checker of the tokens needs (serve --record-tokens): the prompt and sampling
  /// sent, and the token ids received.
  struct recorded {
    std::string prompt;
    double temperature = 0;
    uint64_t seed = 0;
    std::vector<int64_t> token_ids;
  };
  std::optional<recorded> record;

  bool ok() const { return status == outcome::ok; }
  /// "ok", "http_429", "stream_error", "timeout", ...: the key errors are counted by.
  std::string kind() const;
  /// (e2e - ttft) / (output_tokens - 1), when there are at least two tokens and a TTFT.
  std::optional<double> tpot_s() const;
  /// TTFT - engine_prefill - transfer_wire in ms, when the response carried them.
  std::optional<double> overhead_ms() const;
};

/// Service-level objectives for goodput (ms). No TTFT bound unless given.
struct slo_config {
  std::optional<double> ttft_ms;
  double tpot_ms = 25.0; ///< 40 tokens/s
};

/// Nearest-rank summary of a sample (same rule as stats.hpp's percentile).
struct distribution {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
distribution summarize(std::vector<double> v);

struct run_summary {
  size_t total = 0, ok = 0, failed = 0, saturated = 0;
  double duration_s = 0;
  uint64_t input_tokens = 0, output_tokens = 0; ///< of the ok requests
  double requests_per_s = 0, input_tokens_per_s = 0, output_tokens_per_s = 0;
  slo_config slo;
  size_t slo_met = 0;
  std::optional<double> goodput_per_s; ///< nullopt when no request had a TTFT
  distribution ttft_ms, tpot_ms, e2e_ms, overhead_ms, output_tokens_per_request;
  distribution prefill_queue_ms;        ///< of the ok requests whose prfaas object reports it
  std::map<std::string, size_t> errors; ///< by kind(), failed and saturated requests
  std::map<std::string, size_t> routes; ///< of the ok requests that named one
};

/// Whether `r` meets `slo`: ok, TTFT within bound (if any), TPOT within bound (a
/// single-token output has no TPOT and passes that part). Needs a TTFT.
bool meets_slo(const request_result& r, const slo_config& slo);

/// The summary of `results` over a run of `duration_s` seconds.
run_summary summarize_run(const std::vector<request_result>& results, const slo_config& slo,
                          double duration_s);

nlohmann::json to_json(const distribution& d);
nlohmann::json to_json(const run_summary& s);
nlohmann::json to_json(const request_result& r);

/// The human-readable report.
std::string format_report(const run_summary& s);

} // namespace prfaas::loadgen

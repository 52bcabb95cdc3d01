#pragma once

// What one request took, as the response's `prfaas` field reports it and as the
// gateway's histograms count it. Both are made from this one struct, so a client's
// figures and the operator's graphs cannot disagree.
//
// Histograms (base units, labelled by route: prfaas, pd, or none when the request
// ended before a route was chosen):
//   prfaas_gateway_ttft_seconds{route}                  accepted → first token
//   prfaas_gateway_time_per_output_token_seconds{route} (e2e − TTFT) / (output − 1)
//   prfaas_gateway_e2e_seconds{route,outcome}           accepted → the one outcome
//   prfaas_gateway_prefill_queue_seconds{route}         queued at the prefill worker
//   prfaas_gateway_transfer_tail_seconds{route}         KV wire time the prefill did not hide
//   prfaas_gateway_prompt_tokens{route}, _cached_tokens{route}, _output_tokens{route}
// Only finished requests are observed, except e2e, which every outcome observes.
// Counter: prfaas_gateway_requests_total{outcome}.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace prfaas {
class metrics;
}

namespace prfaas::serving {

struct request_figures {
  std::string request_id, route, prefill_node, decode_node;
  uint32_t attempts = 0;
  uint32_t retransmits = 0;
  double engine_prefill_s = 0;
  double transfer_tail_s = 0; ///< wire time after the prefill ended
  double prefill_queue_s = 0;
  double ttft_s = -1; ///< -1: no token was produced
  double e2e_s = 0;
  uint32_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;

  /// The response's `prfaas` object (milliseconds, as documented in docs/openai.md).
  nlohmann::json to_json() const;
  /// Mean time per output token after the first; -1 with fewer than two tokens.
  double time_per_output_token_s() const;
};

/// A request that finished: counted with outcome "ok" and observed in every histogram.
void observe_finished(metrics& m, const request_figures& f);
/// A request's one outcome: prfaas_gateway_requests_total{outcome} and its end-to-end
/// time (a failed or cancelled request gets only these). With e2e_s < 0 the counter's
/// series is only created, at zero (as Prometheus prefers, before any request ends).
void count_outcome(metrics& m, const std::string& route, const std::string& outcome, double e2e_s);

} // namespace prfaas::serving

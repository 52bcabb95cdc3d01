#include "gateway/request_figures.hpp"

#include <chrono>

#include "prfaas/runtime/metrics.hpp"

namespace prfaas::serving {

namespace {

prometheus::Labels by_route(const std::string& route) {
  return {{"route", route.empty() ? "none" : route}};
}

} // namespace

nlohmann::json request_figures::to_json() const {
  return {{"request_id", request_id},
          {"route", route},
          {"prefill_node", prefill_node},
          {"decode_node", decode_node},
          {"attempts", attempts},
          {"engine_prefill_ms", engine_prefill_s * 1e3},
          {"transfer_wire_ms", transfer_tail_s * 1e3},
          {"prefill_queue_ms", prefill_queue_s * 1e3},
          {"retransmits", retransmits},
          {"cached_tokens", cached_tokens},
          {"ttft_ms", ttft_s >= 0 ? nlohmann::json(ttft_s * 1e3) : nlohmann::json()},
          {"e2e_ms", e2e_s * 1e3}};
}

double request_figures::time_per_output_token_s() const {
  if (output_tokens < 2 || ttft_s < 0)
    return -1;
  return (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1);
}

void observe_finished(metrics& m, const request_figures& f) {
  const auto r = by_route(f.route);
  const auto& lat = latency_buckets();
  if (f.ttft_s >= 0)
    m.histogram("prfaas_gateway_ttft_seconds", "Time to first token of finished requests", lat, r)
        .Observe(f.ttft_s);
  if (const double tpot = f.time_per_output_token_s(); tpot >= 0)
    m.histogram("prfaas_gateway_time_per_output_token_seconds",
                "Mean time per output token after the first, per finished request",
                token_interval_buckets(), r)
        .Observe(tpot);
  count_outcome(m, f.route, "ok", f.e2e_s);
  m.histogram("prfaas_gateway_prefill_queue_seconds",
              "Time finished requests waited in a prefill worker's queue", lat, r)
      .Observe(f.prefill_queue_s);
  m.histogram("prfaas_gateway_transfer_tail_seconds",
              "KV transfer time not hidden behind the prefill, per finished request", lat, r)
      .Observe(f.transfer_tail_s);
  const auto& tok = token_count_buckets();
  m.histogram("prfaas_gateway_prompt_tokens", "Prompt tokens of finished requests", tok, r)
      .Observe(f.prompt_tokens);
  m.histogram("prfaas_gateway_cached_tokens",
              "Prompt tokens of finished requests reused from a prefix cache", tok, r)
      .Observe(f.cached_tokens);
  m.histogram("prfaas_gateway_output_tokens", "Output tokens of finished requests", tok, r)
      .Observe(f.output_tokens);
  // The cluster page's "last requests" (wall clock: when it ended).
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.recent().record("request", nlohmann::json{{"time", now},
                                              {"id", f.request_id},
                                              {"route", f.route},
                                              {"prefill_node", f.prefill_node},
                                              {"decode_node", f.decode_node},
                                              {"attempts", f.attempts},
                                              {"prompt_tokens", f.prompt_tokens},
                                              {"cached_tokens", f.cached_tokens},
                                              {"output_tokens", f.output_tokens},
                                              {"ttft_s", f.ttft_s},
                                              {"e2e_s", f.e2e_s},
                                              {"outcome", "ok"}}
                                   .dump());
}

void count_outcome(metrics& m, const std::string& route, const std::string& outcome, double e2e_s) {
  auto& c = m.counter("prfaas_gateway_requests_total", "Requests ended, by outcome",
                      {{"outcome", outcome}});
  if (e2e_s < 0)
    return;
  c.Increment();
  auto labels = by_route(route);
  labels["outcome"] = outcome;
  m.histogram("prfaas_gateway_e2e_seconds", "Time from acceptance to the request's one outcome",
              latency_buckets(), labels)
      .Observe(e2e_s);
}

} // namespace prfaas::serving

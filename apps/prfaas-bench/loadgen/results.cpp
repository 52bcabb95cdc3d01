#include "loadgen/results.hpp"

#include <cstdio>
#include <numeric>

#include "stats.hpp"

namespace prfaas::loadgen {

using json = nlohmann::json;

std::string to_string(outcome o) {
  switch (o) {
  case outcome::ok:
    return "ok";
  case outcome::http_error:
    return "http_error";
  case outcome::stream_error:
    return "stream_error";
  case outcome::bad_response:
    return "bad_response";
  case outcome::timeout:
    return "timeout";
  case outcome::connection_error:
    return "connection_error";
  case outcome::cancelled:
    return "cancelled";
  case outcome::client_saturated:
    return "client_saturated";
  }
  return "?";
}

std::string request_result::kind() const {
  if (status == outcome::http_error)
    return "http_" + std::to_string(http_status);
  return to_string(status);
}

std::optional<double> request_result::tpot_s() const {
  if (!ttft_s || output_tokens < 2)
    return std::nullopt;
  return (e2e_s - *ttft_s) / (output_tokens - 1);
}

std::optional<double> request_result::overhead_ms() const {
  if (!ttft_s || !prfaas.present)
    return std::nullopt;
  return *ttft_s * 1000 - prfaas.engine_prefill_ms - prfaas.transfer_wire_ms;
}

distribution summarize(std::vector<double> v) {
  distribution d;
  d.count = v.size();
  if (v.empty())
    return d;
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  d.p50 = bench::percentile(v, 50); // sorts v
  d.p90 = bench::percentile(v, 90);
  d.p99 = bench::percentile(v, 99);
  d.max = v.back();
  return d;
}

bool meets_slo(const request_result& r, const slo_config& slo) {
  if (!r.ok() || !r.ttft_s)
    return false;
  if (slo.ttft_ms && *r.ttft_s * 1000 > *slo.ttft_ms)
    return false;
  auto tpot = r.tpot_s();
  return !tpot || *tpot * 1000 <= slo.tpot_ms;
}

run_summary summarize_run(const std::vector<request_result>& results, const slo_config& slo,
                          double duration_s) {
  run_summary s;
  s.total = results.size();
  s.duration_s = duration_s;
  s.slo = slo;
  std::vector<double> ttft, tpot, e2e, overhead, out, queue;
  bool any_ttft = false;
  for (auto& r : results) {
    if (r.status == outcome::client_saturated) {
      ++s.saturated;
      ++s.errors[r.kind()];
      continue;
    }
    if (!r.ok()) {
      ++s.failed;
      ++s.errors[r.kind()];
      continue;
    }
    ++s.ok;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    e2e.push_back(r.e2e_s * 1000);
    out.push_back(r.output_tokens);
    if (r.ttft_s) {
      any_ttft = true;
      ttft.push_back(*r.ttft_s * 1000);
    }
    if (auto t = r.tpot_s())
      tpot.push_back(*t * 1000);
    if (auto o = r.overhead_ms())
      overhead.push_back(*o);
    if (r.prfaas.prefill_queue_ms)
      queue.push_back(*r.prfaas.prefill_queue_ms);
    if (!r.prfaas.route.empty())
      ++s.routes[r.prfaas.route];
    if (meets_slo(r, slo))
      ++s.slo_met;
  }
  if (duration_s > 0) {
    s.requests_per_s = s.ok / duration_s;
    s.input_tokens_per_s = s.input_tokens / duration_s;
    s.output_tokens_per_s = s.output_tokens / duration_s;
    if (any_ttft)
      s.goodput_per_s = s.slo_met / duration_s;
  }
  s.ttft_ms = summarize(std::move(ttft));
  s.tpot_ms = summarize(std::move(tpot));
  s.e2e_ms = summarize(std::move(e2e));
  s.overhead_ms = summarize(std::move(overhead));
  s.output_tokens_per_request = summarize(std::move(out));
  s.prefill_queue_ms = summarize(std::move(queue));
  return s;
}

json to_json(const distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
          {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

json to_json(const run_summary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {
      {"requests",
       {{"total", s.total}, {"ok", s.ok}, {"failed", s.failed}, {"client_saturated", s.saturated}}},
      {"duration_s", s.duration_s},
      {"tokens", {{"input", s.input_tokens}, {"output", s.output_tokens}}},
      {"throughput",
       {{"requests_per_s", s.requests_per_s},
        {"input_tokens_per_s", s.input_tokens_per_s},
        {"output_tokens_per_s", s.output_tokens_per_s}}},
      {"goodput",
       {{"requests_per_s", opt(s.goodput_per_s)},
        {"requests", s.slo_met},
        {"slo_ttft_ms", opt(s.slo.ttft_ms)},
        {"slo_tpot_ms", s.slo.tpot_ms}}},
      {"ttft_ms", to_json(s.ttft_ms)},
      {"tpot_ms", to_json(s.tpot_ms)},
      {"e2e_ms", to_json(s.e2e_ms)},
      {"overhead_ms", to_json(s.overhead_ms)},
      {"prefill_queue_ms", to_json(s.prefill_queue_ms)},
      {"output_tokens_per_request", to_json(s.output_tokens_per_request)},
      {"errors", s.errors},
      {"routes", s.routes},
  };
}

json to_json(const request_result& r) {
  json j = {{"index", r.index},
            {"status", r.kind()},
            {"http_status", r.http_status},
            {"input_tokens", r.input_tokens},
            {"requested_output_tokens", r.requested_output_tokens},
            {"output_tokens", r.output_tokens},
            {"scheduled_s", r.scheduled_s},
            {"sent_s", r.sent_s},
            {"ttft_ms", r.ttft_s ? json(*r.ttft_s * 1000) : json(nullptr)},
            {"tpot_ms", r.tpot_s() ? json(*r.tpot_s() * 1000) : json(nullptr)},
            {"e2e_ms", r.e2e_s * 1000}};
  if (!r.error.empty())
    j["error"] = r.error;
  if (r.prfaas.present)
    j["prfaas"] = {{"request_id", r.prfaas.request_id},
                   {"route", r.prfaas.route},
                   {"engine_prefill_ms", r.prfaas.engine_prefill_ms},
                   {"transfer_wire_ms", r.prfaas.transfer_wire_ms},
                   {"ttft_ms", r.prfaas.ttft_ms},
                   {"attempts", r.prfaas.attempts}};
  if (r.prfaas.prefill_queue_ms)
    j["prfaas"]["prefill_queue_ms"] = *r.prfaas.prefill_queue_ms;
  if (r.record)
    j["record"] = {{"prompt", r.record->prompt},
                   {"temperature", r.record->temperature},
                   {"seed", r.record->seed},
                   {"token_ids", r.record->token_ids}};
  return j;
}

namespace {

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string row(const char* name, const distribution& d) {
  if (d.count == 0)
    return fmt("  %-14s %10s\n", name, "-");
  return fmt("  %-14s %10.1f %10.1f %10.1f %10.1f %10.1f %8zu\n", name, d.mean, d.p50, d.p90, d.p99,
             d.max, d.count);
}

std::string counts(const std::map<std::string, size_t>& m) {
  std::string out;
  for (auto& [k, n] : m)
    out += (out.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

} // namespace

std::string format_report(const run_summary& s) {
  std::string out;
  out += fmt("requests       %zu total: %zu ok, %zu failed, %zu client-saturated  (%.1f s)\n",
             s.total, s.ok, s.failed, s.saturated, s.duration_s);
  out += fmt("  %-14s %10s %10s %10s %10s %10s %8s\n", "", "mean", "p50", "p90", "p99", "max", "n");
  out += row("TTFT (ms)", s.ttft_ms);
  out += row("TPOT (ms)", s.tpot_ms);
  out += row("E2E (ms)", s.e2e_ms);
  out += row("overhead (ms)", s.overhead_ms);
  if (s.prefill_queue_ms.count)
    out += row("prefill queue", s.prefill_queue_ms);
  out += "  (overhead = TTFT - engine_prefill_ms - transfer_wire_ms, per request; it includes "
         "the prefill queue)\n";
  out += fmt("throughput     %.3f req/s, %.1f output tok/s, %.1f input tok/s\n", s.requests_per_s,
             s.output_tokens_per_s, s.input_tokens_per_s);
  std::string ttft_bound = s.slo.ttft_ms ? fmt("TTFT <= %.0f ms, ", *s.slo.ttft_ms) : "";
  if (s.goodput_per_s)
    out += fmt("goodput        %.3f req/s (%zu of %zu requests met %sTPOT <= %.1f ms)\n",
               *s.goodput_per_s, s.slo_met, s.total, ttft_bound.c_str(), s.slo.tpot_ms);
  else
    out += "goodput        - (no TTFT measured: streaming is off)\n";
  out += "errors         " + counts(s.errors) + "\n";
  out += "routes         " + counts(s.routes) + "\n";
  if (s.saturated)
    out += fmt("warning        %zu requests were never sent: every --max-in-flight slot was "
               "busy when they arrived, so the client, not the server, set this load; "
               "raise --max-in-flight\n",
               s.saturated);
  return out;
}

} // namespace prfaas::loadgen

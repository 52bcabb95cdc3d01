#pragma once

// Gauges, counters and histograms every worker exposes (queue depth and load; prefill
// time and tokens computed vs reused; decode batch size and step time), labelled by
// worker name and role. Histogram buckets: metrics.hpp.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "prfaas/engine/engine.hpp"

#include "prfaas/runtime/metrics.hpp"

namespace prfaas::serving {

struct worker_metrics {
  worker_metrics(metrics& m, const std::string& worker, const std::string& role)
      : m_(&m), worker_(worker), role_(role),
        queue_depth(m.gauge("prfaas_worker_queue_depth", "Orders waiting for the engine",
                            {{"worker", worker}, {"role", role}})),
        active(m.gauge("prfaas_worker_active", "Orders the engine works on (decode: batch size)",
                       {{"worker", worker}, {"role", role}})),
        load(m.gauge("prfaas_worker_load", "(queued + active) / capacity",
                     {{"worker", worker}, {"role", role}})),
        ok(m.counter("prfaas_worker_orders_total", "Orders ended, by outcome",
                     {{"worker", worker}, {"role", role}, {"outcome", "ok"}})),
        failed(m.counter("prfaas_worker_orders_total", "Orders ended, by outcome",
                         {{"worker", worker}, {"role", role}, {"outcome", "failed"}})),
        rejected(m.counter("prfaas_worker_orders_total", "Orders ended, by outcome",
                           {{"worker", worker}, {"role", role}, {"outcome", "rejected"}})),
        tokens(m.counter("prfaas_worker_tokens_total", "Tokens prefilled or decoded",
                         {{"worker", worker}, {"role", role}})),
        ready(m.gauge("prfaas_worker_ready",
                      "1 once the worker's engine is built and it takes work",
                      {{"worker", worker}, {"role", role}})) {}

  void set(size_t queued, size_t running, size_t capacity) {
    queue_depth.Set(static_cast<double>(queued));
    active.Set(static_cast<double>(running));
    load.Set(capacity ? static_cast<double>(queued + running) / static_cast<double>(capacity)
                      : 0.0);
  }

  /// The engine's own figures (engine::counters(), read on the engine thread) as
  /// prfaas_engine_<name>_total{worker, role}: counters, advanced by what they grew.
  void engine_counters(const std::vector<engine::engine_counter>& now) {
    for (auto& c : now) {
      auto& last = last_[c.name]; // the series exists from the first report, at 0
      auto& counter = m_->counter("prfaas_engine_" + c.name + "_total", c.help,
                                  {{"worker", worker_}, {"role", role_}});
      if (c.value > last)
        counter.Increment(c.value - last);
      last = std::max(last, c.value);
    }
  }

  /// One prefill that succeeded: the engine's time for it (ns; virtual in simulation) and
  /// its prompt tokens, computed and reused from the prefix cache.
  void prefill_done(uint64_t engine_ns, uint32_t computed, int prompt_tokens) {
    tokens.Increment(static_cast<double>(computed));
    const double seconds = static_cast<double>(engine_ns) / 1e9;
    const uint32_t prompt = static_cast<uint32_t>(std::max(prompt_tokens, 0));
    const uint32_t reused = prompt - std::min(computed, prompt);
    const prometheus::Labels who{{"worker", worker_}, {"role", role_}};
    m_->histogram("prfaas_worker_prefill_seconds", "Engine time of each successful prefill",
                  latency_buckets(), who)
        .Observe(seconds);
    for (auto [kind, n] : {std::pair{"computed", computed}, std::pair{"reused", reused}}) {
      auto labels = who;
      labels["kind"] = kind;
      m_->histogram("prfaas_worker_prefill_tokens",
                    "Prompt tokens per prefill, computed or reused from the prefix cache",
                    token_count_buckets(), labels)
          .Observe(n);
    }
  }

  /// One decode step: how many sequences it advanced and the engine's time for it.
  void decode_step(size_t batch, double seconds) {
    static const prometheus::Histogram::BucketBoundaries sizes{1, 2, 4, 8, 16, 32, 64, 128, 256};
    const prometheus::Labels who{{"worker", worker_}, {"role", role_}};
    m_->histogram("prfaas_worker_decode_batch_size", "Sequences advanced per decode step", sizes,
                  who)
        .Observe(static_cast<double>(batch));
    m_->histogram("prfaas_worker_decode_step_seconds", "Engine time per decode step",
                  token_interval_buckets(), who)
        .Observe(seconds);
  }

  /// One KV state taken into the engine (parsed, checked, imported): the engine's time.
  void import_done(double seconds) {
    m_->histogram("prfaas_worker_decode_import_seconds",
                  "Engine time to parse, check and import each arriving KV state",
                  token_interval_buckets(), {{"worker", worker_}, {"role", role_}})
        .Observe(seconds);
  }

private:
  metrics* m_;
  std::string worker_, role_;
  std::map<std::string, double> last_;

public:
  prometheus::Gauge& queue_depth;
  prometheus::Gauge& active;
  prometheus::Gauge& load;
  prometheus::Counter& ok;
  prometheus::Counter& failed;
  prometheus::Counter& rejected;
  prometheus::Counter& tokens;
  prometheus::Gauge& ready;
};

} // namespace prfaas::serving

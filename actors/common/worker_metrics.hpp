#pragma once

// Gauges and counters every worker exposes (queue depth and load, as the issue
// asks), labelled by worker name and role.

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

#include "prfaas/runtime/observer.hpp"

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

namespace {

using json = nlohmann::json;

/// Families kept as time series (and shown as current values).
const std::set<std::string>& history_families() {
  static const std::set<std::string> f{
      "prfaas_scheduler_threshold_tokens", "prfaas_scheduler_planned_threshold_tokens",
      "prfaas_scheduler_bandwidth_scarce", "prfaas_link_throughput_bps",
      "prfaas_link_utilisation",           "prfaas_link_backlog_bytes",
      "prfaas_gateway_live_requests"};
  return f;
}

/// Families shown as current values only.
const std::set<std::string>& current_families() {
  static const std::set<std::string> f{"prfaas_link_state",
                                       "prfaas_link_rtt_seconds",
                                       "prfaas_scheduler_link_up",
                                       "prfaas_worker_queue_depth",
                                       "prfaas_worker_load",
                                       "prfaas_worker_active",
                                       "prfaas_scheduler_routes_total",
                                       "prfaas_gateway_requests_total",
                                       "prfaas_gateway_failovers_total",
                                       "prfaas_gateway_decode_resumes_total",
                                       "prfaas_transport_peers_up"};
  return f;
}

/// Histograms whose sums are current values (`<name>_sum`, `<name>_count`): the
/// cache hit ratio is cached over prompt tokens.
const std::set<std::string>& summed_histograms() {
  static const std::set<std::string> f{"prfaas_gateway_prompt_tokens",
                                       "prfaas_gateway_cached_tokens"};
  return f;
}

/// Histograms whose quantiles over the window are shown, and their short names.
const std::map<std::string, std::string>& quantile_histograms() {
  static const std::map<std::string, std::string> f{
      {"prfaas_gateway_ttft_seconds", "ttft_seconds"},
      {"prfaas_gateway_time_per_output_token_seconds", "tpot_seconds"}};
  return f;
}

json labels_json(const std::vector<std::pair<std::string, std::string>>& labels) {
  json o = json::object();
  for (auto& [k, v] : labels)
    o[k] = v;
  return o;
}

json finite(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

} // namespace

double bucket_quantile(double q, const std::vector<std::pair<double, double>>& buckets) {
  if (buckets.empty() || buckets.back().second <= 0)
    return std::numeric_limits<double>::quiet_NaN();
  const double rank = q * buckets.back().second;
  double lower = 0, below = 0;
  for (auto& [upper, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(upper))
        return lower; // the +Inf bucket: its lower bound, as Prometheus does
      const double in_bucket = count - below;
      return in_bucket <= 0 ? upper : lower + (upper - lower) * (rank - below) / in_bucket;
    }
    lower = upper;
    below = count;
  }
  return lower;
}

node_observer::node_observer(std::shared_ptr<metrics> m, settings s)
    : metrics_(std::move(m)), s_(s) {}

node_observer::~node_observer() {
  stop();
}

void node_observer::start() {
  thread_ = std::thread{[this] {
    std::unique_lock<std::mutex> lk{mtx_};
    while (!stopping_) {
      lk.unlock();
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      sample(now);
      lk.lock();
      wake_.wait_for(lk, s_.period, [this] { return stopping_; });
    }
  }};
}

void node_observer::stop() {
  {
    std::lock_guard<std::mutex> g{mtx_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

node_observer::snapshot node_observer::take(double unix_seconds) const {
  snapshot s;
  s.time = unix_seconds;
  for (auto& fam : metrics_->registry().Collect()) {
    const bool scalar = history_families().count(fam.name) || current_families().count(fam.name);
    const bool summed = summed_histograms().count(fam.name) > 0;
    const bool quantiled = quantile_histograms().count(fam.name) > 0;
    if (!scalar && !summed && !quantiled)
      continue;
    for (auto& m : fam.metric) {
      series_key key{fam.name, {}};
      for (auto& l : m.label)
        if (l.name != "node")
          key.labels.emplace_back(l.name, l.value);
      if (scalar) {
        s.values[key] =
            fam.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      } else if (summed) {
        s.values[{fam.name + "_sum", key.labels}] = m.histogram.sample_sum;
        s.values[{fam.name + "_count", key.labels}] = static_cast<double>(m.histogram.sample_count);
      } else {
        buckets b;
        for (auto& bucket : m.histogram.bucket)
          b.emplace_back(bucket.upper_bound, static_cast<double>(bucket.cumulative_count));
        s.histograms[key] = std::move(b);
      }
    }
  }
  return s;
}

void node_observer::sample(double unix_seconds) {
  auto s = take(unix_seconds);
  std::lock_guard<std::mutex> g{mtx_};
  history_.push_back(std::move(s));
  while (history_.size() > std::max<size_t>(s_.samples, 2))
    history_.pop_front();
}

std::string node_observer::overview_json() const {
  json o;
  o["node"] = metrics_->node();
  o["period_s"] = std::chrono::duration<double>(s_.period).count();
  std::lock_guard<std::mutex> g{mtx_};
  json current = json::array(), series = json::array(), times = json::array();
  json quantiles = {{"window_s", s_.window.count()}};
  if (!history_.empty()) {
    const auto& last = history_.back();
    o["time"] = last.time;
    for (auto& [key, v] : last.values)
      current.push_back(
          {{"name", key.name}, {"labels", labels_json(key.labels)}, {"value", finite(v)}});
    for (auto& h : history_)
      times.push_back(h.time);
    for (auto& [key, _] : last.values) {
      if (!history_families().count(key.name))
        continue;
      json values = json::array();
      for (auto& h : history_) {
        auto it = h.values.find(key);
        values.push_back(it == h.values.end() ? json(nullptr) : finite(it->second));
      }
      series.push_back(
          {{"name", key.name}, {"labels", labels_json(key.labels)}, {"values", values}});
    }
    // The base of the increase: the newest sample at least `window` old (or the oldest
    // there is, early on).
    const snapshot* base = &history_.front();
    for (auto& h : history_) {
      if (last.time - h.time < static_cast<double>(s_.window.count()))
        break;
      base = &h;
    }
    for (auto& [key, b] : last.histograms) {
      buckets inc = b;
      if (auto it = base->histograms.find(key); it != base->histograms.end() && base != &last)
        for (size_t i = 0; i < inc.size() && i < it->second.size(); ++i)
          inc[i].second -= it->second[i].second;
      std::string route = "-";
      for (auto& [k, v] : key.labels)
        if (k == "route")
          route = v;
      auto& q = quantiles[quantile_histograms().at(key.name)][route];
      q["count"] = inc.empty() ? 0.0 : inc.back().second;
      for (auto [name, p] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}})
        q[name] = finite(bucket_quantile(p, inc));
    }
  }
  o["current"] = std::move(current);
  o["history"] = {{"times", std::move(times)}, {"series", std::move(series)}};
  o["quantiles"] = std::move(quantiles);
  auto text = o.dump();
  text.pop_back(); // '}': the events are JSON texts already
  return text + ",\"events\":" + metrics_->recent().json() + "}";
}

} // namespace prfaas

#pragma once

// What a node remembers of its own recent past, for the cluster page. Its admin
// endpoint serves it as JSON at /overview, and any node's /cluster merges every node's:
//   * the current value of the families an operator reads first (link state, workers'
//     queues and load, routes, failovers, token sums for the cache hit ratio);
//   * a time series of a few of them (t, the link's throughput, utilisation and
//     backlog, live requests): one sample per `period`, the last `samples` kept;
//   * TTFT and time-per-output-token quantiles by route over the last `window`, from
//     the histograms' bucket increases — what Prometheus's
//     histogram_quantile(q, increase(..._bucket[window])) gives;
//   * the node's recent events (metrics::recent()).
// Sampling reads the node's own registry (no HTTP), a few hundred series every two
// seconds.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace prfaas {

class metrics;

/// The q-quantile (0..1) of a histogram given as cumulative counts per upper bound
/// (ascending, the last +Inf), interpolating linearly inside the bucket as Prometheus's
/// histogram_quantile does; a quantile in the +Inf bucket is the last finite bound.
/// NaN when the histogram is empty.
double bucket_quantile(double q, const std::vector<std::pair<double, double>>& buckets);

class node_observer {
public:
  struct settings {
    std::chrono::milliseconds period{2000};
    size_t samples = 300;            ///< 10 minutes at the default period
    std::chrono::seconds window{60}; ///< of the latency quantiles
  };

  node_observer(std::shared_ptr<metrics> m, settings s);
  ~node_observer();
  node_observer(const node_observer&) = delete;
  node_observer& operator=(const node_observer&) = delete;

  /// Samples every `period` on a thread of its own until stop().
  void start();
  void stop();
  /// One sample, stamped `unix_seconds` (the thread's step; tests call it directly).
  void sample(double unix_seconds);
  /// This node's overview as a JSON object (the /overview body).
  std::string overview_json() const;

private:
  /// One series: its family, its labels without `node`.
  struct series_key {
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;
    bool operator<(const series_key& o) const {
      return std::tie(name, labels) < std::tie(o.name, o.labels);
    }
  };
  using buckets = std::vector<std::pair<double, double>>;
  struct snapshot {
    double time = 0;
    std::map<series_key, double> values;      ///< every tracked scalar
    std::map<series_key, buckets> histograms; ///< the latency histograms, by route
  };

  snapshot take(double unix_seconds) const;

  std::shared_ptr<metrics> metrics_;
  settings s_;
  mutable std::mutex mtx_;
  std::deque<snapshot> history_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace prfaas

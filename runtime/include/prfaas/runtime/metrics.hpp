#pragma once

// One Prometheus registry per node; every component registers its families here and
// the node's admin endpoint serves it as Prometheus text at /metrics.

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace prfaas {

/// Why a frame was dropped. Each reason is one label value of
/// `prfaas_transport_dropped_total{direction,reason}`.
enum class drop_reason : uint8_t {
  malformed,         ///< not a parsable envelope, or missing/invalid fields
  oversized,         ///< header or bulk frame above the configured maximum
  version,           ///< protocol version differs from ours
  unknown_kind,      ///< envelope kind we do not know
  bulk_mismatch,     ///< bulk frame missing, extra or of the wrong size
  wrong_destination, ///< addressed to another node
  stale_incarnation, ///< addressed to an older incarnation of this node
  stale_source,      ///< sent by an incarnation of its node older than one already heard
  impersonation,     ///< names a source node other than the one its connection authenticated as
  fenced,            ///< from an incarnation this node declared down that has not learned it yet
  unknown_actor,     ///< no local actor of that name
  unknown_type,      ///< the actor does not understand the payload type
  duplicate,         ///< a retried request already seen
  unreachable,       ///< outbound: peer not connected
  overflow,          ///< outbound: per-peer queue full
  unknown_peer,      ///< outbound: node not in the deployment
  late,              ///< a response for a request that already ended
};
inline constexpr size_t drop_reason_count = 17;
const char* to_string(drop_reason);
bool is_inbound_drop(drop_reason);

/// The last few events of each kind a node's actors recorded (a finished request, a move
/// of the threshold), as JSON object texts, for the cluster page. Bounded; thread-safe.
class recent_events {
public:
  explicit recent_events(size_t per_kind = 30) : per_kind_(per_kind) {}
  void record(const std::string& kind, std::string json_object);
  /// `{"kind":[oldest ... newest], ...}`.
  std::string json() const;

private:
  size_t per_kind_;
  mutable std::mutex mtx_;
  std::map<std::string, std::deque<std::string>> events_;
};

/// A node's metrics registry.
class metrics {
public:
  explicit metrics(std::string node);

  prometheus::Registry& registry() { return *registry_; }
  std::shared_ptr<prometheus::Registry> shared_registry() const { return registry_; }

  /// Prometheus text exposition format (version 0.0.4).
  std::string serialize() const;

  /// Finds or creates a counter / gauge. Families are created on first use; the node
  /// label is added to every series.
  prometheus::Counter& counter(const std::string& name, const std::string& help,
                               const prometheus::Labels& labels = {});
  prometheus::Gauge& gauge(const std::string& name, const std::string& help,
                           const prometheus::Labels& labels = {});

  /// Finds or creates a histogram series; `buckets` (upper bounds, ascending) are those
  /// of the series' first use. Use one of the bucket sets below so every node agrees.
  prometheus::Histogram& histogram(const std::string& name, const std::string& help,
                                   const prometheus::Histogram::BucketBoundaries& buckets,
                                   const prometheus::Labels& labels = {});

  /// Reads back a counter's value (0 if absent); used by tests and /health.
  double counter_value(const std::string& name, const prometheus::Labels& labels = {}) const;
  /// Reads back a gauge's value (0 if absent).
  double gauge_value(const std::string& name, const prometheus::Labels& labels = {}) const;

  const std::string& node() const { return node_; }

  /// The node's recent events (beside its metrics: both are what an operator reads).
  recent_events& recent() { return recent_; }
  const recent_events& recent() const { return recent_; }

private:
  std::string node_;
  recent_events recent_;
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mtx_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges_;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms_;
};

/// Histogram bucket sets, in base units, for the ranges the deployments in `configs/`
/// produce (the repository's docs/operations.md lists them):
/// latencies from 5 ms to 10 min: a short prompt's TTFT on a GPU to a 128K-token prefill
/// queued behind others on the simulated H20s;
const prometheus::Histogram::BucketBoundaries& latency_buckets();
/// time per output token, 1 ms to 2 s: a batched GPU decode step to a CPU model's;
const prometheus::Histogram::BucketBoundaries& token_interval_buckets();
/// token counts, 1 to 1M in powers of 4: one-token prompts to 128K+ contexts;
const prometheus::Histogram::BucketBoundaries& token_count_buckets();
/// byte counts, 1 KiB to 64 GiB in powers of 4: a short prompt's KV on the reference
/// model to a 128K-token prompt's on a large model.
const prometheus::Histogram::BucketBoundaries& byte_count_buckets();

/// The transport's counters, resolved once so hot paths only touch atomics.
struct transport_metrics {
  explicit transport_metrics(metrics& m);

  prometheus::Counter& frames_sent;
  prometheus::Counter& frames_received;
  prometheus::Counter& frames_accepted;
  prometheus::Counter& bytes_sent;
  prometheus::Counter& bytes_received;
  prometheus::Counter& requests;
  prometheus::Counter& retries;
  prometheus::Counter& payload_resends; ///< retries that carried the request again
  prometheus::Counter& probes;          ///< retries that only asked after it
  prometheus::Counter& progress;        ///< PROGRESS answers received
  prometheus::Counter& timeouts;
  prometheus::Counter& heartbeats_sent;
  prometheus::Gauge& peers_up;
  prometheus::Gauge& pending_requests;
  std::array<prometheus::Counter*, drop_reason_count> dropped{};

  void drop(drop_reason r, double n = 1) { dropped[static_cast<size_t>(r)]->Increment(n); }
  double dropped_value(drop_reason r) const { return dropped[static_cast<size_t>(r)]->Value(); }
  /// Sum of drops decided when a frame arrives (malformed ... unknown_actor).
  double inbound_dropped() const;
};

} // namespace prfaas

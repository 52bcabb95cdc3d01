#include "prfaas/runtime/metrics.hpp"

#include <sstream>

#include <prometheus/text_serializer.h>

namespace prfaas {

const char* to_string(drop_reason r) {
  switch (r) {
  case drop_reason::malformed:
    return "malformed";
  case drop_reason::oversized:
    return "oversized";
  case drop_reason::version:
    return "version";
  case drop_reason::unknown_kind:
    return "unknown_kind";
  case drop_reason::bulk_mismatch:
    return "bulk_mismatch";
  case drop_reason::wrong_destination:
    return "wrong_destination";
  case drop_reason::stale_incarnation:
    return "stale_incarnation";
  case drop_reason::stale_source:
    return "stale_source";
  case drop_reason::impersonation:
    return "impersonation";
  case drop_reason::fenced:
    return "fenced";
  case drop_reason::unknown_actor:
    return "unknown_actor";
  case drop_reason::unknown_type:
    return "unknown_type";
  case drop_reason::duplicate:
    return "duplicate";
  case drop_reason::unreachable:
    return "unreachable";
  case drop_reason::overflow:
    return "overflow";
  case drop_reason::unknown_peer:
    return "unknown_peer";
  case drop_reason::late:
    return "late";
  }
  return "?";
}

bool is_inbound_drop(drop_reason r) {
  return r <= drop_reason::unknown_actor;
}

metrics::metrics(std::string node)
    : node_(std::move(node)), registry_(std::make_shared<prometheus::Registry>()) {}

std::string metrics::serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, registry_->Collect());
  return out.str();
}

namespace {

/// The family `name` of `fams`, registered with the node label on first use.
template <class Metric, class Builder>
prometheus::Family<Metric>& family_of(std::map<std::string, prometheus::Family<Metric>*>& fams,
                                      Builder builder, const std::string& name,
                                      const std::string& help, const std::string& node,
                                      prometheus::Registry& registry) {
  auto i = fams.find(name);
  if (i == fams.end())
    i = fams.emplace(name,
                     &builder.Name(name).Help(help).Labels({{"node", node}}).Register(registry))
            .first;
  return *i->second;
}

} // namespace

prometheus::Counter& metrics::counter(const std::string& name, const std::string& help,
                                      const prometheus::Labels& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  return family_of(counters_, prometheus::BuildCounter(), name, help, node_, *registry_)
      .Add(labels);
}

prometheus::Histogram& metrics::histogram(const std::string& name, const std::string& help,
                                          const prometheus::Histogram::BucketBoundaries& buckets,
                                          const prometheus::Labels& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  return family_of(histograms_, prometheus::BuildHistogram(), name, help, node_, *registry_)
      .Add(labels, buckets);
}

const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600};
  return b;
}

const prometheus::Histogram::BucketBoundaries& token_interval_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{
      0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2};
  return b;
}

const prometheus::Histogram::BucketBoundaries& token_count_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{1,    4,     16,    64,     256,    1024,
                                                         4096, 16384, 65536, 262144, 1048576};
  return b;
}

const prometheus::Histogram::BucketBoundaries& byte_count_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = [] {
    prometheus::Histogram::BucketBoundaries v;
    for (double x = 1024; x <= 64.0 * (1ull << 30); x *= 4)
      v.push_back(x);
    return v;
  }();
  return b;
}

prometheus::Gauge& metrics::gauge(const std::string& name, const std::string& help,
                                  const prometheus::Labels& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  return family_of(gauges_, prometheus::BuildGauge(), name, help, node_, *registry_).Add(labels);
}

namespace {

/// The value of series `labels` of family `name` in `families`, 0 if absent (the
/// caller holds the registry's lock).
template <class Metric>
double value_of(const std::map<std::string, prometheus::Family<Metric>*>& families,
                const std::string& name, const prometheus::Labels& labels) {
  auto i = families.find(name);
  if (i == families.end() || !i->second->Has(labels))
    return 0;
  return i->second->Add(labels).Value();
}

} // namespace

double metrics::counter_value(const std::string& name, const prometheus::Labels& labels) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return value_of(counters_, name, labels);
}

double metrics::gauge_value(const std::string& name, const prometheus::Labels& labels) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return value_of(gauges_, name, labels);
}

namespace {

prometheus::Counter& tc(metrics& m, const char* name, const char* help) {
  return m.counter(name, help);
}

} // namespace

transport_metrics::transport_metrics(metrics& m)
    : frames_sent(tc(m, "prfaas_transport_frames_sent_total", "Envelopes handed to the wire")),
      frames_received(tc(m, "prfaas_transport_frames_received_total",
                         "Messages read from the wire, valid or not")),
      frames_accepted(tc(m, "prfaas_transport_frames_accepted_total",
                         "Inbound messages that passed validation")),
      bytes_sent(tc(m, "prfaas_transport_bytes_sent_total", "Header plus bulk bytes sent")),
      bytes_received(tc(m, "prfaas_transport_bytes_received_total", "Header plus bulk bytes read")),
      requests(tc(m, "prfaas_transport_requests_total", "Cross-node requests started")),
      retries(tc(m, "prfaas_transport_retries_total", "Request re-sends after no answer")),
      payload_resends(m.counter("prfaas_transport_request_resends_total",
                                "Request retries, by what they carried (payload: the request "
                                "again; probe: only its id)",
                                {{"kind", "payload"}})),
      probes(m.counter("prfaas_transport_request_resends_total",
                       "Request retries, by what they carried (payload: the request again; "
                       "probe: only its id)",
                       {{"kind", "probe"}})),
      progress(tc(m, "prfaas_transport_progress_total",
                  "PROGRESS answers: a probed request is in the receiver's hands")),
      timeouts(
          tc(m, "prfaas_transport_request_timeouts_total", "Requests that hit their deadline")),
      heartbeats_sent(tc(m, "prfaas_transport_heartbeats_sent_total", "Heartbeats sent")),
      peers_up(m.gauge("prfaas_transport_peers_up", "Peers currently up")),
      pending_requests(
          m.gauge("prfaas_transport_pending_requests", "Requests awaiting an answer")) {
  for (size_t i = 0; i < drop_reason_count; ++i) {
    auto r = static_cast<drop_reason>(i);
    dropped[i] =
        &m.counter("prfaas_transport_dropped_total", "Frames dropped, by reason",
                   {{"reason", to_string(r)}, {"direction", is_inbound_drop(r) ? "in" : "out"}});
  }
}

double transport_metrics::inbound_dropped() const {
  double sum = 0;
  for (size_t i = 0; i < drop_reason_count; ++i)
    if (is_inbound_drop(static_cast<drop_reason>(i)))
      sum += dropped[i]->Value();
  return sum;
}

} // namespace prfaas

namespace prfaas {

void recent_events::record(const std::string& kind, std::string json_object) {
  std::lock_guard<std::mutex> g{mtx_};
  auto& q = events_[kind];
  q.push_back(std::move(json_object));
  while (q.size() > per_kind_)
    q.pop_front();
}

std::string recent_events::json() const {
  std::lock_guard<std::mutex> g{mtx_};
  std::string out = "{";
  for (auto& [kind, q] : events_) {
    out += (out.size() > 1 ? ",\"" : "\"") + kind + "\":[";
    for (size_t i = 0; i < q.size(); ++i)
      out += (i ? "," : "") + q[i];
    out += "]";
  }
  return out + "}";
}

} // namespace prfaas

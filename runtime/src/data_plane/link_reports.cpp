// The data plane's reports: the per-peer link reports the link monitor reads, and the
// completed-transfer histograms.

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

void zmq_data_plane_impl::publish_links(dp_clock::time_point now, bool force) {
  if (!force && now - last_publish_ < std::chrono::milliseconds(1))
    return;
  last_publish_ = now;
  std::vector<data_link_report> out;
  out.reserve(peers_.size());
  for (auto& [_, p] : peers_) {
    auto& r = p->report;
    // Throughput: acknowledged bits/s over ~100 ms windows, smoothed (EWMA 0.3).
    if (!p->sampled) {
      p->sampled = true;
      p->sample_at = now;
      p->acked_at_sample = r.bytes_acked;
    } else if (now - p->sample_at >= std::chrono::milliseconds(100)) {
      double dt = std::chrono::duration<double>(now - p->sample_at).count();
      double rate = static_cast<double>(r.bytes_acked - p->acked_at_sample) * 8.0 / dt;
      r.throughput_bps = r.throughput_bps == 0 ? rate : 0.7 * r.throughput_bps + 0.3 * rate;
      p->sample_at = now;
      p->acked_at_sample = r.bytes_acked;
    }
    uint32_t active = 0;
    for (auto id : p->order)
      active += outbound_.count(id) ? 1 : 0;
    r.active_transfers = active;
    r.updated = now;
    p->in_flight_gauge->Set(static_cast<double>(r.bytes_in_flight));
    p->queued_gauge->Set(static_cast<double>(r.bytes_queued));
    out.push_back(r);
  }
  if (rx_pool_) {
    rx_reserved_gauge_->Set(static_cast<double>(rx_reserved_));
    rx_taken_gauge_->Set(static_cast<double>(rx_pool_->capacity() - rx_pool_->available()));
  }
  std::lock_guard<std::mutex> guard{links_mtx_};
  published_ = std::move(out);
}

std::vector<data_link_report> zmq_data_plane_impl::links() const {
  std::lock_guard<std::mutex> guard{links_mtx_};
  return published_;
}

void zmq_data_plane_impl::observe_completed(const std::string& peer, const transfer_stats& st) {
  const prometheus::Labels l{{"peer", peer}};
  metrics_
      .histogram("prfaas_data_transfer_seconds",
                 "Completed sent transfers: open to the receiver's confirmation", latency_buckets(),
                 l)
      .Observe(std::chrono::duration<double>(st.completed - st.opened).count());
  metrics_
      .histogram("prfaas_data_transfer_exposed_seconds",
                 "Completed sent transfers: wire time after the last chunk was produced",
                 latency_buckets(), l)
      .Observe(std::chrono::duration<double>(st.exposed_wire_time()).count());
  metrics_
      .histogram("prfaas_data_transfer_bytes", "Completed sent transfers: payload bytes",
                 byte_count_buckets(), l)
      .Observe(static_cast<double>(st.bytes));
}

} // namespace prfaas::detail

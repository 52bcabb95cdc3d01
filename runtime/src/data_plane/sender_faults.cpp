// The sending side's fault points (seeded, off by default; data_plane_config::faults):
// a chunk transmission dropped, delayed or corrupted. A delayed chunk goes out when its
// time comes unless it was re-sent or acknowledged meanwhile.

#include <random>
#include <vector>

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

/// A copy of `bytes` with one byte flipped (the corrupt fault).
chunk_bytes corrupted_copy(const bulk_buffer& bytes, uint64_t at) {
  std::vector<std::byte> bad(bytes.data(), bytes.data() + bytes.size());
  bad[at % bad.size()] ^= std::byte{0x5a};
  return make_bulk(std::move(bad));
}

bool zmq_data_plane_impl::chance(double p) {
  if (!faults_on_ || p <= 0)
    return false;
  return std::uniform_real_distribution<double>{0.0, 1.0}(rng_) < p;
}

void zmq_data_plane_impl::flush_delayed(dp_clock::time_point now) {
  while (!delayed_.empty() && delayed_.front().due <= now) {
    auto d = delayed_.front();
    auto i = outbound_.find(d.id);
    if (i != outbound_.end() && d.index < i->second.chunks.size()) {
      auto& t = i->second;
      auto& c = t.chunks[d.index];
      // Still held back (not re-sent meanwhile, not acknowledged)?
      if (c.st == out_chunk::state::in_flight && c.seq == 0) {
        auto& p = *peers_.at(t.peer);
        auto h = chunk_header(t, d.index);
        h.seq = p.conns[c.conn].next_seq;
        if (!send_frame(p, static_cast<size_t>(c.conn), h, nullptr, c.data)) {
          blocked_ = true;
          return;
        }
        c.seq = p.conns[c.conn].next_seq++;
        c.sent_at = now;
      }
    }
    delayed_.pop_front();
  }
}

} // namespace prfaas::detail

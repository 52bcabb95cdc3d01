// The receiver's credit: where received chunks land (the receive pool), what each
// inbound transfer is granted, and the buffers given back when a transfer goes quiet.
//
// Every granted chunk that has not arrived has a receive pool buffer set aside for it
// (`reserved`); grants grow only as far as the pool has buffers beyond those, and a
// fair share of it among the transfers arriving, and a transfer holding buffers leaves
// one spare for each transfer holding none. A transfer quiet for 2 x
// chunk_timeout gives back its reservation and the pool buffers of chunks waiting for
// an earlier one, so neither a stalled nor an abandoned transfer starves the others.
// While another transfer waits for its first buffer and none is spare, a reservation
// goes back after `contended_quiet` instead: a sender computing its next part (a
// prefill between slices) would otherwise hold every buffer for seconds.

#include <algorithm>
#include <cstring>

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

// -- buffers and credit --------------------------------------------------------------

namespace {

/// How long a transfer holding a reservation may be quiet while another waits for its
/// first buffer. Bytes arriving count as activity, also midway through a chunk on a
/// slow link, so a transfer that is being received is never this quiet.
constexpr dp_clock::duration contended_quiet = std::chrono::milliseconds(100);

/// Holds no receive buffer, and has chunks left to be granted.
bool wants_first_credit(const inbound_transfer& in) {
  return in.reserved == 0 && in.pending.empty() && (!in.total || in.limit < *in.total);
}

} // namespace

bool zmq_data_plane_impl::may_land(const inbound_transfer& in, uint32_t index) const {
  if (!rx_pool_)
    return true;
  const bool granted = index < in.limit && in.reserved > 0;
  return granted || spare_buffers() > 0;
}

uint64_t zmq_data_plane_impl::spare_buffers() const {
  // A bulk read in progress holds a pool buffer for a chunk whose reservation counts
  // until it lands: that buffer is counted once (per chunk, however many copies of it
  // are being read).
  std::vector<std::pair<const inbound_transfer*, uint32_t>> landing;
  for (auto& c : bulk_in_) {
    if (!c->into || c->discard)
      continue;
    auto it = inbound_.find({c->h.source, c->h.id});
    if (it == inbound_.end())
      continue;
    auto& in = it->second;
    const std::pair<const inbound_transfer*, uint32_t> key{&in, c->h.index};
    if (!in.idle && !in.delivered && c->h.index < in.limit && !in.has(c->h.index) &&
        std::find(landing.begin(), landing.end(), key) == landing.end())
      landing.push_back(key);
  }
  const uint64_t held = rx_reserved_ > landing.size() ? rx_reserved_ - landing.size() : 0;
  const uint64_t available = rx_pool_->available();
  return available > held ? available - held : 0;
}

void zmq_data_plane_impl::recount(inbound_transfer& in) {
  // Granted indices (below `limit`) that have not arrived.
  uint32_t below = static_cast<uint32_t>(std::min<size_t>(in.streamed.size(), in.limit));
  below +=
      static_cast<uint32_t>(std::distance(in.pending.begin(), in.pending.lower_bound(in.limit)));
  const uint32_t want = in.idle ? 0 : in.limit > below ? in.limit - below : 0;
  rx_reserved_ = rx_reserved_ - in.reserved + want;
  in.reserved = want;
}

bool zmq_data_plane_impl::grant(inbound_transfer& in, bool yield) {
  rx_owed_ = 0;
  if (in.delivered || in.idle)
    return false;
  const uint32_t cap = in.total ? *in.total : UINT32_MAX;
  uint32_t limit = in.limit;
  if (!rx_pool_) {
    // No pool: a window of chunks past the first one missing, as before pools.
    limit =
        std::max<uint32_t>(limit, static_cast<uint32_t>(in.streamed.size()) + cfg_.window_chunks);
  } else {
    // A transfer being served (`yield`: one of its chunks just landed) leaves a spare
    // buffer for each transfer holding none that wants credit, so transfers that keep
    // re-granting themselves the buffers they free cannot starve a new one.
    // A transfer that gave its reservation back while others waited, and has not been
    // quiet for long, still counts: its share stays spare for its next chunks.
    const auto now = clock_now();
    uint32_t active = 0, owed = 0;
    for (auto& [_, other] : inbound_) {
      if (other.delivered || (other.idle && now - other.last_activity >= 2 * cfg_.chunk_timeout))
        continue;
      ++active;
      owed += yield && &other != &in && !other.idle && wants_first_credit(other) ? 1 : 0;
    }
    const uint32_t share =
        std::max<uint32_t>(1, rx_pool_->capacity() / std::max<uint32_t>(active, 1));
    const uint32_t target = std::min(cfg_.window_chunks, share);
    const uint32_t used = in.reserved + static_cast<uint32_t>(in.pending.size());
    rx_owed_ = owed;
    uint64_t spare = spare_buffers();
    spare = spare > owed ? spare - owed : 0;
    const uint32_t add =
        static_cast<uint32_t>(std::min<uint64_t>(target > used ? target - used : 0, spare));
    // Grants run from the first index missing; never behind what was granted.
    limit = std::max<uint32_t>(limit, static_cast<uint32_t>(in.streamed.size())) + add;
    if (add == 0)
      limit = in.limit;
  }
  limit = std::min(limit, cap);
  if (limit <= in.limit)
    return false;
  in.limit = limit;
  recount(in);
  return true;
}

void zmq_data_plane_impl::touch(inbound_transfer& in, dp_clock::time_point now) {
  in.last_activity = now;
  if (in.idle) {
    in.idle = false;
    recount(in);
  }
}

void zmq_data_plane_impl::release_idle(dp_clock::time_point now) {
  // A transfer quiet for 2 x chunk_timeout (its sender died, was cut off, or is
  // computing) holds no receive pool buffers: its reservation goes back, and chunks
  // waiting for an earlier one move out of the pool (copied). An abandoned transfer
  // whose CANCEL was lost would otherwise keep them until receive_timeout, and a pool
  // full of them grants every other sender nothing.
  const dp_clock::duration quiet = 2 * cfg_.chunk_timeout;
  const auto reservation_quiet = waiting_for_credit() ? std::min(quiet, contended_quiet) : quiet;
  bool freed = false;
  for (auto& [_, in] : inbound_) {
    if (in.delivered || now - in.last_activity < reservation_quiet)
      continue;
    if (now - in.last_activity >= quiet)
      for (auto& [index, c] : in.pending)
        if (c.first && c.first->pooled()) {
          c.first = copy_bulk(c.first->data(), c.first->size());
          freed = true;
        }
    if (in.idle || in.reserved == 0)
      continue;
    in.idle = true;
    recount(in);
    freed = true;
  }
  freed |= bulk_release_stalled(now, quiet);
  if (freed)
    regrant();
}

bool zmq_data_plane_impl::waiting_for_credit() const {
  if (!rx_pool_ || spare_buffers() > 0)
    return false;
  for (auto& [_, in] : inbound_)
    if (!in.delivered && !in.idle && !in.reply_to.empty() && wants_first_credit(in))
      return true;
  return false;
}

void zmq_data_plane_impl::regrant(const inbound_transfer* served) {
  // Transfers holding nothing first: they are the ones a freed buffer is for; the
  // transfer just served (it yielded) goes last. Delivered ones (tombstones, most of
  // the map) are skipped once, not per pass.
  std::vector<inbound_transfer*> open;
  for (auto& [_, in] : inbound_)
    if (!in.delivered && !in.reply_to.empty())
      open.push_back(&in);
  for (int pass = 0; pass < 2; ++pass)
    for (auto* in : open)
      if ((pass == 0) == (in != served && wants_first_credit(*in)))
        regrant(*in);
}

void zmq_data_plane_impl::regrant(inbound_transfer& in) {
  if (in.delivered || in.reply_to.empty() || !grant(in))
    return;
  data_wire::header a;
  a.k = data_wire::kind::credit;
  a.id = in.id;
  a.credit = in.limit;
  a.source = cfg_.node;
  zmq::message_t to(in.reply_to.data(), in.reply_to.size());
  reply_header(to, a, nullptr);
}

} // namespace prfaas::detail

// The receiving side of the data plane: transfers other nodes send here.
//
// An inbound transfer is keyed by (source node, id). Every chunk is checked against
// its xxh3 checksum: intact → ACK (with the transfer's grant), damaged → NACK. An
// intact chunk is copied into a receive pool buffer (the ZeroMQ message it came in is
// freed at once, so its memory is reused warm) and handed to the sink as soon as
// every chunk before it was; once the announced count went to the sink, the sink gets
// `end` and the sender DONE.
//
// Credit: a sender may send the chunks below the transfer's grant (`limit`); each
// granted chunk that has not arrived has a pool buffer reserved for it. Grants grow
// as buffers are free (up to window_chunks outstanding per transfer, and a fair share
// of the pool among the transfers arriving), in ACKs and, when buffers come back
// later, in CREDIT frames. A full pool therefore stops senders; nothing is allocated
// per chunk, and a transfer larger than the pool streams through it.
//
// What a transfer received survives a failed attempt: a reopen of the same
// (source, id) is told which chunks are already here (resume). Delivered transfers
// stay as tombstones for `receive_timeout`, so a repeated DONE or chunk is answered
// DONE and nothing is delivered twice.

#include <algorithm>
#include <array>
#include <cstring>

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

namespace {

std::string routing_id(const zmq::message_t& identity) {
  return {static_cast<const char*>(identity.data()), identity.size()};
}

/// Keeps an inbound ZeroMQ frame alive as a bulk buffer: zero-copy receive.
class zmq_chunk final : public bulk_buffer {
public:
  explicit zmq_chunk(zmq::message_t m) : msg_(std::move(m)) {}
  const std::byte* data() const noexcept override {
    return static_cast<const std::byte*>(msg_.data());
  }
  size_t size() const noexcept override { return msg_.size(); }

private:
  zmq::message_t msg_;
};

} // namespace

void zmq_data_plane_impl::drain_inbound() {
  if (sim_) {
    for (int n = 0; n < 1024 && !sim_inbound_.empty(); ++n) {
      auto f = std::move(sim_inbound_.front());
      sim_inbound_.pop_front();
      zmq::message_t identity{f.identity.data(), f.identity.size()};
      zmq::message_t head{f.head.data(), f.head.size()};
      auto payload = message_of(f.payload);
      inbound_arrived(identity, head, f.has_payload ? &payload : nullptr);
    }
    return;
  }
  for (int n = 0; n < 1024; ++n) {
    zmq::message_t identity;
    if (!router_.recv(identity, zmq::recv_flags::dontwait))
      return;
    std::array<zmq::message_t, 2> parts;
    size_t count = 0;
    bool more = identity.more();
    while (more) {
      zmq::message_t part;
      (void)router_.recv(part, zmq::recv_flags::none);
      more = part.more();
      if (count < parts.size())
        parts[count] = std::move(part);
      ++count; // frames beyond the second are counted, not kept
    }
    if (count == 0 || count > 2) {
      drop_frame("malformed");
      continue;
    }
    inbound_arrived(identity, parts[0], count == 2 ? &parts[1] : nullptr);
  }
}

void zmq_data_plane_impl::inbound_arrived(const zmq::message_t& identity, zmq::message_t& head,
                                          zmq::message_t* payload) {
  data_wire::decode_error err;
  auto h = data_wire::decode(static_cast<const std::byte*>(head.data()), head.size(), err);
  if (!h || h->source.empty()) {
    drop_frame("malformed");
    return;
  }
  if (authentic(*h, head) && source_current(*h))
    on_inbound(identity, *h, payload);
}

bool zmq_data_plane_impl::reply_header(const zmq::message_t& identity, const data_wire::header& h,
                                       const std::string* payload, bool quiet) {
  auto head = encode_ours(h);
  if (sim_) {
    if (sim_->reply(dp_sim_frame{routing_id(identity), std::move(head),
                                 payload != nullptr ? make_bulk(*payload) : nullptr,
                                 payload != nullptr}))
      return true;
    if (!quiet)
      drop_frame("unroutable_reply");
    return false;
  }
  try {
    if (!router_.send(zmq::buffer(identity.data(), identity.size()),
                      zmq::send_flags::dontwait | zmq::send_flags::sndmore)) {
      drop_frame("reply_overflow"); // the sender re-sends what stays unanswered
      return false;
    }
    router_.send(zmq::buffer(head),
                 payload != nullptr ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload != nullptr)
      router_.send(zmq::buffer(*payload), zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t&) {
    if (!quiet)
      drop_frame("unroutable_reply"); // that connection is gone (ROUTER_MANDATORY)
    return false;
  }
}

void zmq_data_plane_impl::answer(const zmq::message_t& identity, const data_wire::header& h,
                                 data_wire::kind k, uint16_t flags, const std::string* body,
                                 uint32_t credit, uint32_t total) {
  data_wire::header a;
  a.k = k;
  a.id = h.id;
  a.index = h.index;
  a.total = total;
  a.seq = h.seq;
  a.flags = flags;
  a.credit = credit;
  a.source = cfg_.node;
  if (k != data_wire::kind::ack && k != data_wire::kind::nack)
    return (void)reply_header(identity, a, body);
  // A bulk chunk is answered on the DEALER its hello named, which may not be known to
  // our ROUTER yet (its handshake still running): then on the one that sent OPEN,
  // flagged, so the sender does not take the answer's seq for that connection's.
  auto in = inbound_.find({h.source, h.id});
  const bool other = in != inbound_.end() && !in->second.open_reply_to.empty() &&
                     routing_id(identity) != in->second.open_reply_to;
  if (reply_header(identity, a, body, other) || !other)
    return;
  a.flags |= data_wire::flag_rerouted;
  const zmq::message_t to(in->second.open_reply_to.data(), in->second.open_reply_to.size());
  reply_header(to, a, body);
}

void zmq_data_plane_impl::refuse(const zmq::message_t& identity, const data_wire::header& h,
                                 const std::string& reason) {
  log_->info("data_transfer_refused id={} source={} sink={} reason=\"{}\"", h.id, h.source, h.sink,
             reason);
  answer(identity, h, data_wire::kind::refuse, 0, &reason);
}

prometheus::Counter& zmq_data_plane_impl::path_counter(const char* path) {
  auto c = chunk_paths_.find(path);
  if (c == chunk_paths_.end())
    c = chunk_paths_
            .emplace(path, &metrics_.counter("prfaas_data_chunks_received_total",
                                             "Data-plane chunk frames taken, by path (tcp: the "
                                             "bulk connections; zmq: the ZeroMQ ones)",
                                             {{"path", path}}))
            .first;
  return *c->second;
}

prometheus::Counter&
zmq_data_plane_impl::peer_counter(std::map<std::string, prometheus::Counter*>& cache,
                                  const std::string& peer, const char* name, const char* help) {
  auto c = cache.find(peer);
  if (c == cache.end())
    c = cache.emplace(peer, &metrics_.counter(name, help, {{"peer", peer}})).first;
  return *c->second;
}

void zmq_data_plane_impl::on_inbound(const zmq::message_t& identity, const data_wire::header& h,
                                     zmq::message_t* payload) {
  using data_wire::kind;
  switch (h.k) {
  case kind::open:
    return inbound_open(identity, h, payload);
  case kind::chunk:
    return inbound_chunk(identity, h, payload);
  case kind::done:
    return inbound_done(identity, h);
  case kind::cancel:
    if (auto it = inbound_.find({h.source, h.id}); it != inbound_.end() && !it->second.delivered) {
      log_->info("data_transfer_cancelled id={} source={}", h.id, h.source);
      drop_inbound(it, "cancelled by the sender");
    }
    return;
  default:
    drop_frame("unexpected_kind");
    return;
  }
}

void zmq_data_plane_impl::inbound_open(const zmq::message_t& identity, const data_wire::header& h,
                                       zmq::message_t* payload) {
  auto key = std::make_pair(h.source, h.id);
  auto now = clock_now();
  if (!sink_for(h.sink)) {
    if (auto it = inbound_.find(key); it != inbound_.end())
      drop_inbound(it, "re-opened for sink '" + h.sink + "', which is not here");
    refuse(identity, h, "no sink '" + h.sink + "' on node '" + cfg_.node + "'");
    return;
  }
  auto it = inbound_.find(key);
  if (it != inbound_.end() && !it->second.delivered && it->second.sink != h.sink) {
    // The same id for another sink: not a resume. Start over.
    drop_inbound(it, "re-opened for sink '" + h.sink + "'");
    it = inbound_.end();
  }
  if (it == inbound_.end()) {
    it = inbound_.try_emplace(key).first;
    it->second.source = h.source;
    it->second.id = h.id;
    it->second.stats.opened = now;
  }
  auto& in = it->second;
  touch(in, now);
  in.reply_to = routing_id(identity);
  in.open_reply_to = in.reply_to;
  if (in.delivered) {
    answer(identity, h, data_wire::kind::done); // an earlier attempt already delivered it
    return;
  }
  in.sink = h.sink;
  in.meta = payload != nullptr ? payload->to_string() : std::string{};
  grant(in);
  std::vector<data_wire::held_chunk> held;
  held.reserve(in.arrived());
  for (uint32_t i = 0; i < in.streamed.size(); ++i)
    held.push_back({i, in.streamed[i]});
  for (auto& [index, c] : in.pending)
    held.push_back({index, c.second});
  auto body = data_wire::encode_held(held);
  if (!held.empty())
    log_->info("data_transfer_resume id={} source={} held={}", h.id, h.source, held.size());
  // With the bulk path on, every answer to OPEN names its port.
  const uint16_t flags = data_wire::flag_open | (bulk_port_ != 0 ? data_wire::flag_bulk : 0);
  answer(identity, h, data_wire::kind::ack, flags, &body, in.limit, bulk_port_);
}

inbound_transfer* zmq_data_plane_impl::chunk_target(const zmq::message_t& identity,
                                                    const data_wire::header& h) {
  auto it = inbound_.find({h.source, h.id});
  if (it == inbound_.end()) {
    drop_frame("unknown_transfer");
    refuse(identity, h,
           "unknown transfer " + std::to_string(h.id) + " (never opened here, or expired)");
    return nullptr;
  }
  auto& in = it->second;
  touch(in, clock_now());
  in.reply_to = routing_id(identity);
  if (in.delivered) {
    answer(identity, h, data_wire::kind::done);
    return nullptr;
  }
  if ((in.total && h.index >= *in.total) || (h.has_total() && h.index >= h.total)) {
    drop_frame("malformed");
    return nullptr;
  }
  if (in.has(h.index)) {
    ++in.stats.retransmits; // a re-send of what we have: answer again
    answer(identity, h, data_wire::kind::ack, 0, nullptr, in.limit);
    return nullptr;
  }
  return &in;
}

void zmq_data_plane_impl::chunk_accept(const zmq::message_t& identity, const data_wire::header& h,
                                       inbound_transfer& in, const std::byte* data, size_t size,
                                       bulk_ptr landed) {
  using data_wire::kind;
  if (data_wire::checksum(data, size) != h.checksum) {
    ++in.stats.corrupted;
    peer_counter(corrupt_, h.source, "prfaas_data_corrupt_chunks_total",
                 "Data-plane chunks that failed their checksum")
        .Increment();
    log_->info("data_chunk_corrupt id={} chunk={} source={}", h.id, h.index, h.source);
    answer(identity, h, kind::nack, 0, nullptr, in.limit);
    return;
  }
  if (!landed) {
    // Sent beyond its grant with no spare buffer: unanswered, so it is re-sent.
    drop_frame("no_credit");
    return;
  }
  peer_counter(received_bytes_, h.source, "prfaas_data_bytes_received_total",
               "Data-plane payload bytes received intact")
      .Increment(static_cast<double>(size));
  in.stats.bytes += size;
  ++in.stats.chunks;
  in.pending.emplace(h.index, std::make_pair(std::move(landed), h.checksum));
  if (h.has_total() && !in.total)
    in.total = h.total;
  recount(in);
  if (!stream_ready(in, identity))
    return; // the sink went away: refused and forgotten
  grant(in, true);
  answer(identity, h, kind::ack, 0, nullptr, in.limit);
  maybe_deliver({h.source, h.id}, identity);
  if (rx_owed_ > 0)
    regrant(&in); // what `in` left spare goes out now, not at the waiter's next OPEN
}

void zmq_data_plane_impl::inbound_chunk(const zmq::message_t& identity, const data_wire::header& h,
                                        zmq::message_t* payload) {
  if (payload == nullptr) {
    drop_frame("malformed");
    return;
  }
  if (payload->size() > cfg_.max_chunk_bytes) {
    drop_frame("oversized");
    auto reason = "chunk " + std::to_string(h.index) + " has " + std::to_string(payload->size()) +
                  " bytes, above max_chunk_bytes " + std::to_string(cfg_.max_chunk_bytes);
    if (auto it = inbound_.find({h.source, h.id}); it != inbound_.end())
      drop_inbound(it, reason);
    refuse(identity, h, reason);
    return;
  }
  auto* in = chunk_target(identity, h);
  if (in == nullptr)
    return;
  path_counter("zmq").Increment();
  // The checksum is checked on the landed copy (a pool buffer) when there is one:
  // the bytes are then read once from the message and once, warm, from the buffer.
  const auto* data = static_cast<const std::byte*>(payload->data());
  const auto size = payload->size();
  auto landed = land(*in, h.index, *payload);
  if (landed)
    data = landed->data();
  chunk_accept(identity, h, *in, data, size, std::move(landed));
}

void zmq_data_plane_impl::inbound_done(const zmq::message_t& identity, const data_wire::header& h) {
  auto key = std::make_pair(h.source, h.id);
  auto it = inbound_.find(key);
  if (it == inbound_.end()) {
    drop_frame("unknown_transfer");
    refuse(identity, h,
           "unknown transfer " + std::to_string(h.id) + " (never opened here, or expired)");
    return;
  }
  auto& in = it->second;
  auto now = clock_now();
  touch(in, now);
  in.reply_to = routing_id(identity);
  if (in.delivered) {
    answer(identity, h, data_wire::kind::done);
    return;
  }
  if (!h.has_total() || in.streamed.size() > h.total ||
      (!in.pending.empty() && in.pending.rbegin()->first >= h.total)) {
    drop_frame("malformed");
    return;
  }
  in.total = h.total;
  if (in.stats.finished == dp_clock::time_point{})
    in.stats.finished = now;
  maybe_deliver(key, identity);
}

bulk_ptr zmq_data_plane_impl::land(inbound_transfer& in, uint32_t index, zmq::message_t& payload) {
  if (!rx_pool_)
    return std::make_shared<zmq_chunk>(std::move(payload));
  if (!may_land(in, index))
    return nullptr;
  if (payload.size() > rx_pool_->buffer_bytes()) {
    // Larger than a pool buffer: kept as it arrived (one allocation, counted).
    metrics_
        .counter("prfaas_data_unpooled_chunks_total",
                 "Received chunks larger than a receive pool buffer, kept as they arrived")
        .Increment();
    return std::make_shared<zmq_chunk>(std::move(payload));
  }
  auto b = rx_pool_->try_acquire();
  if (!b)
    return nullptr;
  std::memcpy(b.data(), payload.data(), payload.size());
  b.resize(payload.size());
  payload.rebuild(); // its memory goes back to the allocator now, warm for the next
  return std::move(b).share();
}

// -- handing over --------------------------------------------------------------------

std::shared_ptr<stream_handlers> zmq_data_plane_impl::sink_for(const std::string& sink) {
  std::lock_guard<std::mutex> guard{sinks_mtx_};
  auto s = sinks_.find(sink);
  return s == sinks_.end() ? nullptr : s->second;
}

bool zmq_data_plane_impl::stream_ready(inbound_transfer& in, const zmq::message_t& identity) {
  if (in.pending.empty() || in.pending.begin()->first != in.streamed.size())
    return true;
  auto sink = sink_for(in.sink);
  if (!sink) {
    std::string reason = "sink '" + in.sink + "' was removed on node '" + cfg_.node + "'";
    data_wire::header a;
    a.k = data_wire::kind::refuse;
    a.id = in.id;
    a.source = cfg_.node;
    reply_header(identity, a, &reason);
    drop_inbound(inbound_.find({in.source, in.id}), reason);
    return false;
  }
  const inbound_ref ref{in.id, in.source, in.sink, in.meta};
  while (!in.pending.empty() && in.pending.begin()->first == in.streamed.size()) {
    auto node = in.pending.extract(in.pending.begin());
    in.streamed.push_back(node.mapped().second);
    try {
      if (sink->chunk)
        sink->chunk(ref, node.key(), std::move(node.mapped().first));
    } catch (const std::exception& e) {
      log_->error("data_sink_handler_threw sink={} error=\"{}\"", in.sink, e.what());
    }
  }
  return true;
}

void zmq_data_plane_impl::maybe_deliver(const std::pair<std::string, uint64_t>& key,
                                        const zmq::message_t& identity) {
  auto it = inbound_.find(key);
  if (it == inbound_.end())
    return;
  auto& in = it->second;
  // Chunks stream in index order, so streamed == total means all went to the sink.
  if (in.delivered || !in.total || in.streamed.size() != *in.total)
    return;
  auto sink = sink_for(in.sink);
  data_wire::header a;
  a.id = in.id;
  a.source = cfg_.node;
  if (!sink) {
    std::string reason = "sink '" + in.sink + "' was removed on node '" + cfg_.node + "'";
    a.k = data_wire::kind::refuse;
    reply_header(identity, a, &reason);
    drop_inbound(it, reason);
    return;
  }
  auto now = clock_now();
  received_transfer rt;
  rt.id = in.id;
  rt.source = in.source;
  rt.sink = in.sink;
  rt.meta = std::move(in.meta);
  if (in.stats.finished == dp_clock::time_point{})
    in.stats.finished = now;
  in.stats.completed = now;
  rt.stats = in.stats;
  // Keep a tombstone: later frames of this transfer are answered DONE.
  in.delivered = true;
  rx_reserved_ -= in.reserved;
  in.reserved = 0;
  in.pending.clear();
  in.streamed = {};
  in.last_activity = now;
  a.k = data_wire::kind::done;
  reply_header(identity, a, nullptr);
  metrics_
      .counter("prfaas_data_received_transfers_total", "Data-plane transfers delivered to a sink",
               {{"peer", rt.source}})
      .Increment();
  log_->debug("data_transfer_received id={} source={} sink={} bytes={} chunks={}", rt.id, rt.source,
              rt.sink, rt.stats.bytes, rt.stats.chunks);
  try {
    if (sink->end)
      sink->end(std::move(rt));
  } catch (const std::exception& e) {
    log_->error("data_sink_handler_threw sink={} error=\"{}\"", in.sink, e.what());
  }
}

void zmq_data_plane_impl::drop_inbound(
    std::map<std::pair<std::string, uint64_t>, inbound_transfer>::iterator it,
    const std::string& reason) {
  if (it == inbound_.end())
    return;
  auto in = std::move(it->second);
  inbound_.erase(it);
  if (in.delivered)
    return;
  rx_reserved_ -= in.reserved;
  in.pending.clear(); // their buffers go back to the pool
  if (in.streamed.empty())
    return;
  if (auto sink = sink_for(in.sink); sink && sink->abort) {
    try {
      sink->abort(inbound_ref{in.id, in.source, in.sink, in.meta}, reason);
    } catch (const std::exception& e) {
      log_->error("data_sink_handler_threw sink={} error=\"{}\"", in.sink, e.what());
    }
  }
}

void zmq_data_plane_impl::expire_inbound(dp_clock::time_point now) {
  std::vector<std::pair<std::string, uint64_t>> late;
  for (auto& [key, in] : inbound_)
    if (now - in.last_activity >= cfg_.receive_timeout)
      late.push_back(key);
  for (auto& key : late) {
    auto it = inbound_.find(key);
    auto& in = it->second;
    if (!in.delivered) {
      log_->info("data_inbound_expired id={} source={} sink={} chunks={} granted={} "
                 "pool_available={} pool_reserved={}",
                 in.id, in.source, in.sink, in.arrived(), in.limit,
                 rx_pool_ ? rx_pool_->available() : 0, rx_reserved_);
      metrics_
          .counter("prfaas_data_inbound_expired_total",
                   "Partial inbound transfers forgotten after receive_timeout")
          .Increment();
    }
    drop_inbound(it, "expired: nothing arrived for " + format_duration(cfg_.receive_timeout));
  }
}

} // namespace prfaas::detail

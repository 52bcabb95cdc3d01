// The receiving side of the data plane: transfers other nodes send here.
//
// An inbound transfer is keyed by (source node, id). Every chunk is checked against
// its xxh3 checksum: intact → ACK (with this node's credit), damaged → NACK. Chunks
// are kept as the ZeroMQ messages they arrived in (no copy) until every chunk of the
// announced count is here; then the sink gets them all at once, in push order, and
// the sender gets DONE. What a transfer received survives a failed attempt: a reopen
// of the same (source, id) is told which chunks are already here (resume). Delivered
// transfers stay as tombstones for `receive_timeout`, so a repeated DONE or chunk is
// answered DONE and nothing is delivered twice.

#include <array>

#include "zmq_data_plane_impl.hpp"

namespace prfaas::detail {

namespace {

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
    data_wire::decode_error err;
    auto h =
        data_wire::decode(static_cast<const std::byte*>(parts[0].data()), parts[0].size(), err);
    if (!h || h->source.empty()) {
      drop_frame("malformed");
      continue;
    }
    on_inbound(identity, *h, count == 2 ? &parts[1] : nullptr);
  }
}

void zmq_data_plane_impl::reply_header(const zmq::message_t& identity, const data_wire::header& h,
                                       const std::string* payload) {
  auto head = data_wire::encode(h);
  try {
    if (!router_.send(zmq::buffer(identity.data(), identity.size()),
                      zmq::send_flags::dontwait | zmq::send_flags::sndmore)) {
      drop_frame("reply_overflow"); // the sender re-sends what stays unanswered
      return;
    }
    router_.send(zmq::buffer(head),
                 payload != nullptr ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload != nullptr)
      router_.send(zmq::buffer(*payload), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    drop_frame("unroutable_reply"); // that connection is gone (ROUTER_MANDATORY)
  }
}

void zmq_data_plane_impl::on_inbound(const zmq::message_t& identity, const data_wire::header& h,
                                     zmq::message_t* payload) {
  using data_wire::kind;
  auto now = dp_clock::now();
  auto key = std::make_pair(h.source, h.id);
  auto answer = [&](kind k, uint16_t flags = 0, const std::string* body = nullptr) {
    data_wire::header a;
    a.k = k;
    a.id = h.id;
    a.index = h.index;
    a.seq = h.seq;
    a.flags = flags;
    a.credit = cfg_.window_chunks;
    a.source = cfg_.node;
    reply_header(identity, a, body);
  };
  auto refuse = [&](const std::string& reason) {
    log_->info("data_transfer_refused id={} source={} sink={} reason=\"{}\"", h.id, h.source,
               h.sink, reason);
    answer(kind::refuse, 0, &reason);
  };
  auto refuse_unknown = [&] {
    drop_frame("unknown_transfer");
    refuse("unknown transfer " + std::to_string(h.id) + " (never opened here, or expired)");
  };
  // A per-peer counter, found once and kept in `cache`.
  auto peer_counter = [&](std::map<std::string, prometheus::Counter*>& cache, const char* name,
                          const char* help) -> prometheus::Counter& {
    auto c = cache.find(h.source);
    if (c == cache.end())
      c = cache.emplace(h.source, &metrics_.counter(name, help, {{"peer", h.source}})).first;
    return *c->second;
  };

  switch (h.k) {
  case kind::open: {
    bool known_sink = false;
    {
      std::lock_guard<std::mutex> guard{sinks_mtx_};
      known_sink = sinks_.count(h.sink) != 0;
    }
    if (!known_sink) {
      inbound_.erase(key);
      refuse("no sink '" + h.sink + "' on node '" + cfg_.node + "'");
      return;
    }
    auto [it, fresh] = inbound_.try_emplace(key);
    auto& in = it->second;
    in.last_activity = now;
    if (in.delivered) {
      answer(kind::done); // an earlier attempt already delivered it
      return;
    }
    if (fresh) {
      in.source = h.source;
      in.id = h.id;
      in.stats.opened = now;
    } else if (in.sink != h.sink) {
      in.chunks.clear(); // the same id for another sink: not a resume
      in.total.reset();
      in.stats = {};
      in.stats.opened = now;
    }
    in.sink = h.sink;
    in.meta = payload != nullptr ? payload->to_string() : std::string{};
    std::vector<data_wire::held_chunk> held;
    held.reserve(in.chunks.size());
    for (auto& [index, c] : in.chunks)
      held.push_back({index, c.second});
    auto body = data_wire::encode_held(held);
    if (!held.empty())
      log_->info("data_transfer_resume id={} source={} held={}", h.id, h.source, held.size());
    answer(kind::ack, data_wire::flag_open, &body);
    return;
  }
  case kind::chunk: {
    if (payload == nullptr) {
      drop_frame("malformed");
      return;
    }
    if (payload->size() > cfg_.max_chunk_bytes) {
      drop_frame("oversized");
      inbound_.erase(key);
      refuse("chunk " + std::to_string(h.index) + " has " + std::to_string(payload->size()) +
             " bytes, above max_chunk_bytes " + std::to_string(cfg_.max_chunk_bytes));
      return;
    }
    auto it = inbound_.find(key);
    if (it == inbound_.end())
      return refuse_unknown();
    auto& in = it->second;
    in.last_activity = now;
    if (in.delivered) {
      answer(kind::done);
      return;
    }
    if ((in.total && h.index >= *in.total) || (h.has_total() && h.index >= h.total)) {
      drop_frame("malformed");
      return;
    }
    if (in.chunks.count(h.index) != 0) {
      ++in.stats.retransmits; // a re-send of what we have: answer again
      answer(kind::ack);
      return;
    }
    auto data = static_cast<const std::byte*>(payload->data());
    if (data_wire::checksum(data, payload->size()) != h.checksum) {
      ++in.stats.corrupted;
      peer_counter(corrupt_, "prfaas_data_corrupt_chunks_total",
                   "Data-plane chunks that failed their checksum")
          .Increment();
      log_->info("data_chunk_corrupt id={} chunk={} source={}", h.id, h.index, h.source);
      answer(kind::nack);
      return;
    }
    auto size = payload->size();
    peer_counter(received_bytes_, "prfaas_data_bytes_received_total",
                 "Data-plane payload bytes received intact")
        .Increment(static_cast<double>(size));
    in.stats.bytes += size;
    ++in.stats.chunks;
    in.chunks.emplace(
        h.index,
        std::make_pair(bulk_ptr{std::make_shared<zmq_chunk>(std::move(*payload))}, h.checksum));
    if (h.has_total() && !in.total)
      in.total = h.total;
    answer(kind::ack);
    maybe_deliver(key, identity);
    return;
  }
  case kind::done: {
    auto it = inbound_.find(key);
    if (it == inbound_.end())
      return refuse_unknown();
    auto& in = it->second;
    in.last_activity = now;
    if (in.delivered) {
      answer(kind::done);
      return;
    }
    if (!h.has_total() || (!in.chunks.empty() && in.chunks.rbegin()->first >= h.total)) {
      drop_frame("malformed");
      return;
    }
    in.total = h.total;
    if (in.stats.finished == dp_clock::time_point{})
      in.stats.finished = now;
    maybe_deliver(key, identity);
    return;
  }
  case kind::cancel:
    if (inbound_.erase(key) != 0)
      log_->info("data_transfer_cancelled id={} source={}", h.id, h.source);
    return;
  default:
    drop_frame("unexpected_kind");
    return;
  }
}

void zmq_data_plane_impl::maybe_deliver(const std::pair<std::string, uint64_t>& key,
                                        const zmq::message_t& identity) {
  auto it = inbound_.find(key);
  if (it == inbound_.end())
    return;
  auto& in = it->second;
  // Indices are checked against the count on arrival, so count == total means all.
  if (in.delivered || !in.total || in.chunks.size() != *in.total)
    return;
  sink_handler handler;
  {
    std::lock_guard<std::mutex> guard{sinks_mtx_};
    if (auto s = sinks_.find(in.sink); s != sinks_.end())
      handler = s->second;
  }
  data_wire::header a;
  a.id = in.id;
  a.source = cfg_.node;
  a.credit = cfg_.window_chunks;
  if (!handler) {
    std::string reason = "sink '" + in.sink + "' was removed on node '" + cfg_.node + "'";
    a.k = data_wire::kind::refuse;
    reply_header(identity, a, &reason);
    inbound_.erase(it);
    return;
  }
  auto now = dp_clock::now();
  received_transfer rt;
  rt.id = in.id;
  rt.source = in.source;
  rt.sink = in.sink;
  rt.meta = std::move(in.meta);
  rt.chunks.reserve(in.chunks.size());
  for (auto& [_, c] : in.chunks)
    rt.chunks.push_back(std::move(c.first));
  if (in.stats.finished == dp_clock::time_point{})
    in.stats.finished = now;
  in.stats.completed = now;
  rt.stats = in.stats;
  // Keep a tombstone: later frames of this transfer are answered DONE.
  in.delivered = true;
  in.chunks.clear();
  in.last_activity = now;
  a.k = data_wire::kind::done;
  reply_header(identity, a, nullptr);
  metrics_
      .counter("prfaas_data_received_transfers_total", "Data-plane transfers delivered to a sink",
               {{"peer", rt.source}})
      .Increment();
  log_->debug("data_transfer_received id={} source={} sink={} bytes={} chunks={}", rt.id, rt.source,
              rt.sink, rt.stats.bytes, rt.stats.chunks);
  auto sink = rt.sink;
  try {
    handler(std::move(rt));
  } catch (const std::exception& e) {
    log_->error("data_sink_handler_threw sink={} error=\"{}\"", sink, e.what());
  }
}

void zmq_data_plane_impl::expire_inbound(dp_clock::time_point now) {
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    auto& in = it->second;
    if (now - in.last_activity < cfg_.receive_timeout) {
      ++it;
      continue;
    }
    if (!in.delivered) {
      log_->info("data_inbound_expired id={} source={} sink={} chunks={}", in.id, in.source,
                 in.sink, in.chunks.size());
      metrics_
          .counter("prfaas_data_inbound_expired_total",
                   "Partial inbound transfers forgotten after receive_timeout")
          .Increment();
    }
    it = inbound_.erase(it);
  }
}

} // namespace prfaas::detail

// The sending side of the data plane: transfers this node opened.
//
// Per transfer: OPEN until the receiver acks it (with its grant and the chunks it
// already holds), then chunks in push order while the grant allows (the receiver
// raises it as its buffers free up: in ACKs and CREDIT frames), then DONE once the
// last chunk is out; `done` runs when the receiver answers DONE (delivered). A
// transfer stalled on its grant with nothing in flight re-sends OPEN after
// `chunk_timeout`: its answer carries the current grant, so a lost CREDIT frame costs
// a delay, never the transfer.
//
// Loss detection, per connection (ZeroMQ keeps each connection's frames in order,
// and the receiver answers on the connection a chunk came on, so acks come back in
// send order): a chunk is lost when a later transmission on its connection was
// answered, or when its connection made no progress for `chunk_timeout`. Measuring
// the timeout from the last progress, not from the send, keeps a deep but moving
// queue (a slow link with a large window) from looking like loss. On a bulk TCP
// connection progress also counts bytes leaving: written into the kernel, or the
// kernel's send queue draining. A link slower than a chunk per `chunk_timeout` would
// otherwise see every chunk re-sent behind itself on the same connection, each copy
// adding to the load that made it late.

#include <algorithm>
#include <cstring>
#include <numeric>

#include "zmq_data_plane_impl.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas::detail {

namespace {

void release_chunk(void*, void* hint) {
  delete static_cast<chunk_bytes*>(hint);
}

} // namespace

zmq::message_t message_of(const chunk_bytes& bytes) {
  if (!bytes || bytes->size() == 0)
    return zmq::message_t{};
  // Zero-copy: the message holds a reference to the bytes until it is dropped.
  auto* keep = new chunk_bytes(bytes);
  return zmq::message_t(const_cast<std::byte*>(bytes->data()), bytes->size(), release_chunk, keep);
}

// -- commands ------------------------------------------------------------------------

void zmq_data_plane_impl::on_open(dp_command& c) {
  auto fail_now = [&](std::string error, const char* outcome) {
    metrics_
        .counter("prfaas_data_transfers_total", "Data-plane transfers sent, by outcome",
                 {{"peer", c.peer}, {"outcome", outcome}})
        .Increment();
    log_->warn("data_transfer_failed id={} peer={} error=\"{}\"", c.id, c.peer, error);
    transfer_outcome out{c.id, false, std::move(error), {}};
    out.stats.opened = c.at;
    if (c.done)
      c.done(std::move(out));
  };
  if (outbound_.count(c.id)) {
    fail_now("transfer " + std::to_string(c.id) + " is already open", "duplicate");
    return;
  }
  auto* p = peer_for(c.peer);
  if (p == nullptr) {
    fail_now("unknown peer '" + c.peer + "'", "unknown_peer");
    return;
  }
  if (p->conns.empty()) {
    try {
      connect(*p);
    } catch (const zmq::error_t& e) {
      p->conns.clear();
      fail_now("cannot connect to peer '" + c.peer + "' at " + p->endpoint + ": " + e.what(),
               "unreachable");
      return;
    }
  }
  outbound_transfer t;
  t.id = c.id;
  t.peer = c.peer;
  t.sink = c.sink;
  t.meta = std::move(c.meta);
  t.done = std::move(c.done);
  t.deadline = c.at + cfg_.transfer_timeout;
  t.stats.opened = c.at;
  p->order.push_back(c.id);
  outbound_.emplace(c.id, std::move(t));
  log_->debug("data_transfer_open id={} peer={} sink={}", c.id, c.peer, c.sink);
}

void zmq_data_plane_impl::on_push(dp_command& c) {
  auto i = outbound_.find(c.id);
  if (i == outbound_.end())
    return; // cancelled, failed or never opened: ignored by contract
  auto& t = i->second;
  if (t.finished) {
    log_->warn("data_push_after_finish id={} peer={}", t.id, t.peer);
    return;
  }
  auto size = static_cast<uint64_t>(c.chunk->size());
  auto index = static_cast<uint32_t>(t.chunks.size());
  if (size > cfg_.max_chunk_bytes || t.chunks.size() >= UINT32_MAX - 1) {
    complete(t.id, false,
             "chunk " + std::to_string(index) + " of transfer " + std::to_string(t.id) + " has " +
                 std::to_string(size) + " bytes, above max_chunk_bytes " +
                 std::to_string(cfg_.max_chunk_bytes),
             "rejected");
    return;
  }
  out_chunk oc;
  oc.data = std::move(c.chunk);
  oc.size = size;
  oc.checksum = c.checksum;
  t.stats.bytes += size;
  ++t.stats.chunks;
  t.deadline = c.at + cfg_.transfer_timeout; // a producer still adding keeps it alive
  auto h = t.held.find(index);
  if (h != t.held.end() && h->second == oc.checksum) {
    // Resume: the receiver kept this chunk from an earlier attempt.
    oc.st = out_chunk::state::acked;
    oc.data.reset();
    ++t.acked;
    t.held.erase(h);
  } else {
    t.queued_bytes += size;
    peers_.at(t.peer)->report.bytes_queued += size;
  }
  t.chunks.push_back(std::move(oc));
}

void zmq_data_plane_impl::on_finish(dp_command& c) {
  auto i = outbound_.find(c.id);
  if (i == outbound_.end() || i->second.finished)
    return;
  i->second.finished = true;
  i->second.stats.finished = c.at;
  i->second.deadline = c.at + cfg_.transfer_timeout;
}

void zmq_data_plane_impl::on_cancel(dp_command& c) {
  auto i = outbound_.find(c.id);
  if (i == outbound_.end())
    return;
  auto& t = i->second;
  auto* p = peers_.at(t.peer).get();
  if (t.open_sent && !p->blackhole) {
    data_wire::header h;
    h.k = data_wire::kind::cancel;
    h.id = t.id;
    h.source = cfg_.node;
    if (!send_control(*p, h, nullptr))
      log_->debug("data_cancel_unsent id={} peer={}", t.id, t.peer); // receiver expires it
  }
  complete(t.id, false, "cancelled", "cancelled");
}

// -- sending -------------------------------------------------------------------------

bool zmq_data_plane_impl::send_frame(dp_peer& p, size_t conn, const data_wire::header& h,
                                     const std::string* small, const chunk_bytes& bulk) {
  if (h.k == data_wire::kind::chunk && bulk_send(p, conn, h, bulk))
    return true; // on the bulk path (bulk.cpp)
  auto head = encode_ours(h);
  bool more = small != nullptr || bulk != nullptr;
  if (sim_) {
    sim_->send(p.name, conn,
               dp_sim_frame{routing_id_of(conn), std::move(head),
                            small != nullptr ? make_bulk(*small) : bulk, more},
               h.k == data_wire::kind::chunk);
    return true;
  }
  auto& s = p.conns[conn].socket;
  try {
    if (!s.send(zmq::buffer(head), zmq::send_flags::dontwait |
                                       (more ? zmq::send_flags::sndmore : zmq::send_flags::none)))
      return false;
    // Once the first part is in, ZeroMQ takes the rest of the message too.
    if (small != nullptr) {
      s.send(zmq::buffer(*small), zmq::send_flags::none);
    } else if (bulk != nullptr) {
      // Zero-copy: ZeroMQ holds a reference to the chunk until it has sent it.
      auto m = message_of(bulk);
      s.send(m, zmq::send_flags::none);
    }
    return true;
  } catch (const zmq::error_t& e) {
    log_->warn("data_send_failed peer={} error={}", p.name, e.what());
    drop_frame("send_error");
    return true; // lost: the re-send timer covers it
  }
}

bool zmq_data_plane_impl::send_control(dp_peer& p, const data_wire::header& h,
                                       const std::string* small) {
  for (size_t i = 0; i < p.conns.size(); ++i)
    if (send_frame(p, i, h, small, nullptr))
      return true;
  return false;
}

zmq_data_plane_impl::chunk_send zmq_data_plane_impl::send_chunk(dp_peer& p, outbound_transfer& t,
                                                                uint32_t index, bool again,
                                                                dp_clock::time_point now) {
  if (!p.bucket.ready(now)) {
    auto w = p.bucket.wait(now);
    pacing_wait_ = pacing_wait_ ? std::min(*pacing_wait_, w) : w;
    return chunk_send::paced;
  }
  auto& c = t.chunks[index];
  auto h = chunk_header(t, index);
  // Fault points (seeded; off by default): one decision per transmission.
  bool drop = p.blackhole || chance(cfg_.faults.drop);
  bool delay = !drop && chance(cfg_.faults.delay);
  bool corrupt = !drop && !delay && c.size > 0 && chance(cfg_.faults.corrupt);

  auto order = by_load(p);
  size_t used = order.front();
  uint32_t seq = 0;
  if (drop || delay) {
    if (!delay)
      seq = p.conns[used].next_seq++; // "sent" and lost on the wire
    else
      delayed_.push_back({now + cfg_.faults.delay_for, t.id, index});
    log_->debug("data_fault id={} chunk={} peer={} fault={}", t.id, index, p.name,
                drop ? "drop" : "delay");
  } else {
    auto payload = c.data;
    if (corrupt) {
      payload = corrupted_copy(*c.data, rng_());
      log_->debug("data_fault id={} chunk={} peer={} fault=corrupt", t.id, index, p.name);
    }
    bool sent = false;
    for (auto k : order) {
      h.seq = p.conns[k].next_seq;
      if (send_frame(p, k, h, nullptr, payload)) {
        used = k;
        seq = p.conns[k].next_seq++;
        sent = true;
        break;
      }
    }
    if (!sent) {
      blocked_ = true;
      return chunk_send::blocked;
    }
  }
  mark_sent(p, t, index, used, seq, again, now);
  return chunk_send::sent;
}

void zmq_data_plane_impl::mark_sent(dp_peer& p, outbound_transfer& t, uint32_t index, size_t conn,
                                    uint32_t seq, bool again, dp_clock::time_point now) {
  auto& c = t.chunks[index];
  p.bucket.take(c.size);
  if (c.st == out_chunk::state::in_flight) {
    p.conns[c.conn].in_flight_bytes -= c.size;
  } else {
    c.st = out_chunk::state::in_flight;
    t.in_flight.insert(index);
    p.report.bytes_in_flight += c.size;
    p.report.bytes_queued -= c.size;
    t.queued_bytes -= c.size;
  }
  p.conns[conn].in_flight_bytes += c.size;
  c.conn = static_cast<int>(conn);
  c.seq = seq;
  c.sent_at = now;
  c.resend = false;
  p.report.bytes_sent += c.size;
  p.bytes_sent->Increment(static_cast<double>(c.size));
  p.chunks_sent->Increment();
  if (again) {
    ++t.stats.retransmits;
    ++p.report.retransmits;
    p.retransmits->Increment();
    probe_hit(metrics_, "data.chunk_retransmit");
  }
}

data_wire::header zmq_data_plane_impl::chunk_header(const outbound_transfer& t,
                                                    uint32_t index) const {
  data_wire::header h;
  h.k = data_wire::kind::chunk;
  h.id = t.id;
  h.index = index;
  h.checksum = t.chunks[index].checksum;
  h.source = cfg_.node;
  if (t.finished) {
    h.flags |= data_wire::flag_total;
    h.total = static_cast<uint32_t>(t.chunks.size());
  }
  return h;
}

void zmq_data_plane_impl::pump(dp_clock::time_point now) {
  blocked_ = false;
  pacing_wait_.reset();
  for (auto& [_, p] : peers_)
    if (!p->order.empty())
      pump_peer(*p, now);
}

bool zmq_data_plane_impl::pump_peer(dp_peer& p, dp_clock::time_point now) {
  for (size_t k = 0; k < p.order.size(); ++k) {
    auto it = outbound_.find(p.order[k]);
    if (it == outbound_.end())
      continue;
    auto& t = it->second;
    // Stalled on the grant with nothing in flight: ask again (OPEN is idempotent).
    bool starved = t.accepted && t.next < t.chunks.size() && t.next >= t.limit &&
                   t.in_flight.empty() && now - t.limit_at >= cfg_.chunk_timeout &&
                   now - t.open_sent_at >= cfg_.chunk_timeout;
    if (!t.accepted || starved) {
      if (!t.open_sent || starved || now - t.open_sent_at >= cfg_.chunk_timeout) {
        data_wire::header h;
        h.k = data_wire::kind::open;
        h.id = t.id;
        h.source = cfg_.node;
        h.sink = t.sink;
        if (!p.blackhole && !send_control(p, h, &t.meta)) {
          blocked_ = true;
          return false;
        }
        if (t.open_sent)
          log_->debug("data_open_resent id={} peer={} starved={}", t.id, p.name, starved);
        t.open_sent = true;
        t.open_sent_at = now;
      }
      continue;
    }
    // Re-sends first: nacked chunks, and chunks lost or overdue on their connection.
    for (auto index : t.in_flight) {
      auto& c = t.chunks[index];
      bool lost = c.resend;
      if (!lost && c.seq != 0) {
        auto& conn = p.conns[c.conn];
        lost = conn.acked_seq > c.seq ||
               (now - std::max(c.sent_at, conn.last_ack) >= cfg_.chunk_timeout &&
                now - bulk_progress(p, static_cast<size_t>(c.conn), now) >= cfg_.chunk_timeout);
      } else if (!lost) {
        lost = now - c.sent_at >= cfg_.chunk_timeout + cfg_.faults.delay_for;
      }
      if (!lost)
        continue;
      if (auto r = send_chunk(p, t, index, true, now); r != chunk_send::sent)
        return r != chunk_send::blocked;
    }
    // New chunks while the receiver's grant, our window and the peer's byte window allow.
    while (t.next < t.chunks.size()) {
      auto& c = t.chunks[t.next];
      if (c.st == out_chunk::state::acked) { // held by the receiver already (resume)
        ++t.next;
        continue;
      }
      if (t.next >= t.limit || t.in_flight.size() >= cfg_.window_chunks)
        break;
      if (p.report.bytes_in_flight > 0 && p.report.bytes_in_flight + c.size > cfg_.window_bytes)
        return true; // the peer's window is full: later transfers wait too (FIFO)
      if (auto r = send_chunk(p, t, static_cast<uint32_t>(t.next), false, now);
          r != chunk_send::sent)
        return r != chunk_send::blocked;
      ++t.next;
    }
    // DONE tells the receiver the count, and is repeated until it answers.
    if (t.finished && t.next == t.chunks.size() &&
        (!t.done_sent || now - t.done_sent_at >= cfg_.chunk_timeout)) {
      data_wire::header h;
      h.k = data_wire::kind::done;
      h.id = t.id;
      h.flags = data_wire::flag_total;
      h.total = static_cast<uint32_t>(t.chunks.size());
      h.source = cfg_.node;
      if (!p.blackhole && !send_control(p, h, nullptr)) {
        blocked_ = true;
        return false;
      }
      t.done_sent = true;
      t.done_sent_at = now;
    }
  }
  return true;
}

// -- replies -------------------------------------------------------------------------

void zmq_data_plane_impl::drain_replies(dp_peer& p, size_t conn) {
  if (sim_) {
    for (int n = 0; n < 1024 && !p.conns[conn].sim_in.empty(); ++n) {
      auto f = std::move(p.conns[conn].sim_in.front());
      p.conns[conn].sim_in.pop_front();
      auto payload = message_of(f.payload);
      reply_arrived(p, conn, zmq::message_t{f.head.data(), f.head.size()},
                    f.has_payload ? &payload : nullptr);
    }
    return;
  }
  auto& s = p.conns[conn].socket;
  for (int n = 0; n < 1024; ++n) {
    zmq::message_t head;
    if (!s.recv(head, zmq::recv_flags::dontwait))
      return;
    zmq::message_t payload;
    size_t parts = 1;
    bool more = head.more();
    while (more) {
      zmq::message_t part;
      (void)s.recv(part, zmq::recv_flags::none);
      more = part.more();
      if (++parts == 2)
        payload = std::move(part);
    }
    if (parts > 2) {
      drop_frame("malformed");
      continue;
    }
    reply_arrived(p, conn, head, parts == 2 ? &payload : nullptr);
  }
}

void zmq_data_plane_impl::reply_arrived(dp_peer& p, size_t conn, const zmq::message_t& head,
                                        const zmq::message_t* payload) {
  data_wire::decode_error err;
  auto h = data_wire::decode(static_cast<const std::byte*>(head.data()), head.size(), err);
  if (!h) {
    drop_frame("malformed");
    return;
  }
  if (source_current(*h))
    on_reply(p, conn, *h, payload);
}

void zmq_data_plane_impl::raise_limit(outbound_transfer& t, uint32_t limit,
                                      dp_clock::time_point now) {
  // Grants only grow; answers on different connections may arrive out of order.
  if (limit > t.limit) {
    t.limit = limit;
    t.limit_at = now;
  }
}

void zmq_data_plane_impl::mark_acked(dp_peer& p, outbound_transfer& t, uint32_t index,
                                     dp_clock::time_point) {
  if (index >= t.chunks.size()) {
    drop_frame("malformed");
    return;
  }
  auto& c = t.chunks[index];
  if (c.st != out_chunk::state::in_flight)
    return; // a second answer for the same chunk
  t.in_flight.erase(index);
  p.report.bytes_in_flight -= c.size;
  p.conns[c.conn].in_flight_bytes -= c.size;
  c.st = out_chunk::state::acked;
  c.data.reset(); // the receiver has it: free the sender's copy now
  ++t.acked;
  p.report.bytes_acked += c.size;
}

void zmq_data_plane_impl::on_open_ack(dp_peer& p, outbound_transfer& t, const data_wire::header& h,
                                      const zmq::message_t* payload, dp_clock::time_point now) {
  // The first answer to OPEN, or one to a re-sent OPEN (starved, or a lost answer):
  // the receiver's grant, its bulk port and what it holds, current as of now.
  t.accepted = true;
  raise_limit(t, h.credit, now);
  if (h.flags & data_wire::flag_bulk)
    bulk_announced(p, static_cast<uint16_t>(h.total));
  std::vector<data_wire::held_chunk> held;
  if (payload == nullptr || !data_wire::decode_held(static_cast<const std::byte*>(payload->data()),
                                                    payload->size(), held))
    return;
  for (auto& hc : held) {
    if (hc.index >= t.chunks.size()) {
      t.held[hc.index] = hc.checksum;
      continue;
    }
    auto& c = t.chunks[hc.index];
    if (c.st == out_chunk::state::queued && c.checksum == hc.checksum) {
      c.st = out_chunk::state::acked;
      c.data.reset();
      ++t.acked;
      t.queued_bytes -= c.size;
      p.report.bytes_queued -= c.size;
    }
  }
  if (!held.empty())
    log_->info("data_transfer_resumed id={} peer={} held={}", t.id, p.name, held.size());
}

void zmq_data_plane_impl::on_reply(dp_peer& p, size_t conn, const data_wire::header& h,
                                   const zmq::message_t* payload) {
  using data_wire::kind;
  auto it = outbound_.find(h.id);
  if (it == outbound_.end() || it->second.peer != p.name) {
    drop_frame("late"); // an answer for a transfer that already ended
    return;
  }
  auto& t = it->second;
  auto now = clock_now();
  // An answer's seq is progress of the connection it came on (unless rerouted there).
  if ((h.k == kind::ack || h.k == kind::nack) &&
      !(h.flags & (data_wire::flag_open | data_wire::flag_rerouted))) {
    p.conns[conn].last_ack = now;
    p.conns[conn].acked_seq = std::max(p.conns[conn].acked_seq, h.seq);
  }
  switch (h.k) {
  case kind::ack:
    if (h.flags & data_wire::flag_open)
      return on_open_ack(p, t, h, payload, now);
    raise_limit(t, h.credit, now);
    mark_acked(p, t, h.index, now);
    return;
  case kind::credit:
    raise_limit(t, h.credit, now);
    return;
  case kind::nack:
    if (h.index < t.chunks.size() && t.chunks[h.index].st == out_chunk::state::in_flight) {
      t.chunks[h.index].resend = true;
      ++t.stats.corrupted;
      ++p.report.corrupted;
      log_->info("data_chunk_nacked id={} chunk={} peer={}", t.id, h.index, p.name);
    }
    return;
  case kind::done: {
    // The receiver holds everything: acks still on their way on other
    // connections would arrive after the transfer ended.
    std::vector<uint32_t> pending{t.in_flight.begin(), t.in_flight.end()};
    for (auto index : pending)
      mark_acked(p, t, index, now);
    t.stats.completed = now;
    complete(t.id, true, {}, "ok");
    return;
  }
  case kind::refuse: {
    std::string reason = payload != nullptr ? payload->to_string() : "no reason given";
    complete(t.id, false, "refused by peer '" + p.name + "': " + reason, "refused");
    return;
  }
  default:
    drop_frame("unexpected_kind");
    return;
  }
}

// -- endings -------------------------------------------------------------------------

void zmq_data_plane_impl::complete(uint64_t id, bool ok, std::string error, const char* outcome) {
  auto it = outbound_.find(id);
  if (it == outbound_.end())
    return;
  auto t = std::move(it->second);
  outbound_.erase(it);
  if (auto pi = peers_.find(t.peer); pi != peers_.end()) {
    auto& p = *pi->second;
    for (auto index : t.in_flight) {
      auto& c = t.chunks[index];
      p.report.bytes_in_flight -= c.size;
      p.conns[c.conn].in_flight_bytes -= c.size;
    }
    p.report.bytes_queued -= t.queued_bytes;
    std::erase(p.order, id);
  }
  metrics_
      .counter("prfaas_data_transfers_total", "Data-plane transfers sent, by outcome",
               {{"peer", t.peer}, {"outcome", outcome}})
      .Increment();
  if (ok) {
    observe_completed(t.peer, t.stats);
    log_->debug("data_transfer_done id={} peer={} sink={} bytes={} chunks={} retransmits={} "
                "corrupted={} exposed_ms={:.3f}",
                id, t.peer, t.sink, t.stats.bytes, t.stats.chunks, t.stats.retransmits,
                t.stats.corrupted,
                std::chrono::duration<double, std::milli>(t.stats.exposed_wire_time()).count());
  } else {
    auto level = std::string_view{outcome} == "cancelled" || std::string_view{outcome} == "stopped"
                     ? spdlog::level::info
                     : spdlog::level::warn;
    log_->log(level, "data_transfer_failed id={} peer={} sink={} outcome={} error=\"{}\"", id,
              t.peer, t.sink, outcome, error);
  }
  if (!t.done)
    return;
  // What links() shows is current when `done` runs.
  publish_links(clock_now(), true);
  try {
    t.done(transfer_outcome{id, ok, std::move(error), t.stats});
  } catch (const std::exception& e) {
    log_->error("data_done_handler_threw id={} error=\"{}\"", id, e.what());
  }
}

} // namespace prfaas::detail

#include "prfaas/runtime/zmq_wire.hpp"

#include <pthread.h>

#include <array>
#include <algorithm>
#include <cerrno>
#include <vector>

namespace prfaas {

namespace {

int to_ms(duration d) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

/// Keeps an inbound ZeroMQ frame alive as a bulk buffer: zero-copy receive.
class zmq_bulk final : public bulk_buffer {
public:
  explicit zmq_bulk(zmq::message_t m) : msg_(std::move(m)) {}
  const std::byte* data() const noexcept override {
    return static_cast<const std::byte*>(msg_.data());
  }
  size_t size() const noexcept override { return msg_.size(); }

private:
  zmq::message_t msg_;
};

/// Zero-copy send: ZeroMQ calls this when it is done with the bytes.
void release_bulk(void*, void* hint) {
  delete static_cast<bulk_ptr*>(hint);
}

int to_s(duration d) {
  return std::max(1, static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(d).count()));
}

void common_options(zmq::socket_t& s, const transport_config& cfg) {
  s.set(zmq::sockopt::linger, to_ms(cfg.linger));
  s.set(zmq::sockopt::sndhwm, static_cast<int>(cfg.send_hwm));
  s.set(zmq::sockopt::rcvhwm, static_cast<int>(cfg.receive_hwm));
  zmq_liveness(s, cfg);
  // A hard cap well above our own limits: protects memory; our limits are counted.
  s.set(zmq::sockopt::maxmsgsize,
        static_cast<int64_t>(std::max(cfg.max_bulk_bytes, cfg.max_envelope_bytes) * 2));
}

} // namespace

void zmq_liveness(zmq::socket_t& s, const transport_config& cfg) {
  if (cfg.zmq_heartbeat_interval > duration::zero()) {
    s.set(zmq::sockopt::heartbeat_ivl, to_ms(cfg.zmq_heartbeat_interval));
    s.set(zmq::sockopt::heartbeat_timeout, to_ms(cfg.zmq_heartbeat_timeout));
    s.set(zmq::sockopt::heartbeat_ttl, to_ms(cfg.zmq_heartbeat_timeout));
  }
  s.set(zmq::sockopt::tcp_keepalive, 1);
  s.set(zmq::sockopt::tcp_keepalive_idle, to_s(cfg.zmq_keepalive_idle));
  s.set(zmq::sockopt::tcp_keepalive_intvl, to_s(cfg.zmq_keepalive_interval));
  s.set(zmq::sockopt::tcp_keepalive_cnt, static_cast<int>(cfg.zmq_keepalive_count));
}

zmq_wire::zmq_wire(zmq::context_t& ctx, std::string self, std::string bind_endpoint,
                   std::map<std::string, std::string> peers, transport_config cfg, logger_ptr log,
                   security_ptr sec)
    : self_(std::move(self)), cfg_(cfg), log_(std::move(log)),
      router_(ctx, zmq::socket_type::router) {
  common_options(router_, cfg_);
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_.set(zmq::sockopt::router_handover, 1);
  if (sec) {
    zap_ = curve_server(ctx, router_, sec, "control");
    monitor_ = std::make_unique<handshake_monitor>(ctx, router_, sec, "control");
  }
  router_.bind(bind_endpoint);
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  peers.erase(self_);
  for (auto& [name, ep] : peers) {
    auto link = std::make_unique<peer_link>();
    link->dealer = zmq::socket_t{ctx, zmq::socket_type::dealer};
    common_options(link->dealer, cfg_);
    link->dealer.set(zmq::sockopt::routing_id, self_);
    link->dealer.set(zmq::sockopt::immediate, 1);
    link->dealer.set(zmq::sockopt::reconnect_ivl, 100);
    link->dealer.set(zmq::sockopt::reconnect_ivl_max, 1000);
    if (sec)
      curve_client(link->dealer, *sec, name);
    link->dealer.connect(ep);
    peers_.emplace(name, std::move(link));
  }
}

zmq_wire::~zmq_wire() {
  stop();
}

void zmq_wire::start(inbound_handler on_frame, drop_handler on_drop) {
  on_frame_ = std::move(on_frame);
  on_drop_ = std::move(on_drop);
  io_ = std::thread{[this] {
    pthread_setname_np(pthread_self(), "prfaas.wire");
    run();
  }};
}

void zmq_wire::stop() {
  if (stopped_.exchange(true))
    return;
  stop_ = true;
  if (io_.joinable())
    io_.join();
  for (auto& [_, p] : peers_) {
    std::lock_guard<std::mutex> guard{p->mtx};
    p->dealer.close();
    p->backlog.clear();
  }
  monitor_.reset(); // stops monitoring while the socket is open; closes its PAIR
  router_.close();
  zap_.reset();
}

size_t zmq_wire::backlog() const {
  return backlog_.load();
}

bool zmq_wire::try_send(peer_link& p, outbound& o) {
  try {
    // On EAGAIN ZeroMQ leaves the message with us, unchanged, for the next try.
    if (!o.bulk)
      return p.dealer.send(o.header, zmq::send_flags::dontwait).has_value();
    // The bulk frame is handed over zero-copy, kept alive by a bulk_ptr until
    // ZeroMQ releases it.
    if (!p.dealer.send(o.header, zmq::send_flags::dontwait | zmq::send_flags::sndmore))
      return false;
    auto* b = new bulk_ptr(o.bulk);
    zmq::message_t bm(const_cast<std::byte*>((*b)->data()), (*b)->size(), release_bulk, b);
    // Once the first part is in, the rest of the message is accepted too.
    p.dealer.send(bm, zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t& e) {
    log_->warn("wire_send_failed error={}", e.what());
    if (on_drop_)
      on_drop_(drop_reason::unreachable);
    return true; // dropped, do not retry
  }
}

send_status zmq_wire::send(const std::string& peer, std::string header, bulk_ptr bulk) {
  return enqueue(peer, outbound{zmq::message_t{header.data(), header.size()}, std::move(bulk)});
}

send_status zmq_wire::send_message(const std::string& peer,
                                   const google::protobuf::MessageLite& header, bulk_ptr bulk) {
  zmq::message_t m{header.ByteSizeLong()};
  header.SerializeWithCachedSizesToArray(static_cast<uint8_t*>(m.data()));
  return enqueue(peer, outbound{std::move(m), std::move(bulk)});
}

send_status zmq_wire::enqueue(const std::string& peer, outbound o) {
  if (stop_)
    return send_status::stopped;
  auto i = peers_.find(peer);
  if (i == peers_.end())
    return send_status::unknown_peer;
  auto& p = *i->second;
  std::lock_guard<std::mutex> guard{p.mtx};
  if (stop_)
    return send_status::stopped;
  // Keep order: while older messages wait, new ones queue behind them.
  if (p.backlog.empty() && try_send(p, o))
    return send_status::queued;
  if (p.backlog.size() >= cfg_.outbound_queue) {
    if (cfg_.overflow == overflow_policy::drop_newest)
      return send_status::overflow;
    p.backlog.pop_front(); // drop_oldest: this one goes in, the oldest is lost
    --backlog_;
    if (on_drop_)
      on_drop_(drop_reason::overflow);
  }
  p.backlog.push_back(std::move(o));
  ++backlog_;
  return send_status::queued;
}

size_t zmq_wire::purge(const std::string& peer) {
  auto i = peers_.find(peer);
  if (i == peers_.end())
    return 0;
  std::lock_guard<std::mutex> guard{i->second->mtx};
  auto n = i->second->backlog.size();
  i->second->backlog.clear();
  backlog_ -= n;
  return n;
}

bool zmq_wire::flush_backlogs() {
  if (backlog_.load() == 0)
    return false;
  bool left = false;
  for (auto& [_, p] : peers_) {
    std::lock_guard<std::mutex> guard{p->mtx};
    while (!p->backlog.empty() && try_send(*p, p->backlog.front())) {
      p->backlog.pop_front();
      --backlog_;
    }
    left = left || !p->backlog.empty();
  }
  return left;
}

void zmq_wire::run() {
  bool busy = false;
  int timeout_ms = 0;
  while (!stop_) {
    // Short waits while something waits in a backlog; otherwise wake at least
    // every 50 ms to notice stop().
    const int wait = busy || backlog_.load() > 0 ? 1 : 50;
    received first;
    bool got = false;
    try {
      if (monitor_) {
        zmq::pollitem_t items[2] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, monitor_->poll_item()};
        zmq::poll(items, 2, std::chrono::milliseconds(wait));
        if (items[1].revents & ZMQ_POLLIN)
          monitor_->drain();
      } else {
        // Without a monitor to watch, block in the receive itself: a woken thread
        // then reads its frame at once, with none of zmq_poll's extra calls into
        // the kernel before it (they are most of the hand-off on a round trip).
        if (wait != timeout_ms)
          router_.set(zmq::sockopt::rcvtimeo, timeout_ms = wait);
        got = receive(first, true);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM)
        break;
      continue;
    }
    bool more_in = drain_inbound(got ? &first : nullptr);
    bool more_out = flush_backlogs();
    busy = more_in || more_out;
  }
}

bool zmq_wire::receive(received& r, bool block) {
  if (!router_.recv(r.id, block ? zmq::recv_flags::none : zmq::recv_flags::dontwait))
    return false;
  r.count = 0;
  while (router_.get(zmq::sockopt::rcvmore)) {
    zmq::message_t part;
    if (!router_.recv(part, zmq::recv_flags::none))
      break;
    if (r.count < 2)
      r.parts[r.count] = std::move(part);
    ++r.count; // frames beyond the second are counted, not kept
  }
  return true;
}

void zmq_wire::deliver(received& r, bool more_waiting) {
  inbound_frame f;
  f.peer = std::string_view{static_cast<const char*>(r.id.data()), r.id.size()};
  f.parts = r.count;
  f.more_waiting = more_waiting;
  if (zap_ && r.count >= 1) {
    // Set by ZeroMQ from our ZAP handler's reply; valid while the frame lives.
    if (const char* user = zmq_msg_gets(r.parts[0].handle(), "User-Id"))
      f.authenticated_node = user;
  }
  if (r.count >= 1) {
    f.header = static_cast<const std::byte*>(r.parts[0].data());
    f.header_size = r.parts[0].size();
  }
  if (r.count >= 2)
    f.bulk = std::make_shared<zmq_bulk>(std::move(r.parts[1]));
  on_frame_(f);
}

bool zmq_wire::drain_inbound(received* first) {
  // One frame is read ahead, so each is delivered knowing whether another waits
  // behind it (inbound_frame::more_waiting) at no extra call into ZeroMQ.
  constexpr int batch_limit = 4096;
  received cur, next;
  if (first)
    std::swap(cur, *first);
  else if (!receive(cur))
    return false;
  for (int n = 0;; ++n) {
    if (stop_)
      return true;
    if (n == batch_limit) { // the last frame of a batch ends its burst (wire.hpp)
      deliver(cur, false);
      return true;
    }
    const bool more = receive(next);
    deliver(cur, more);
    if (!more)
      return false;
    std::swap(cur, next);
  }
}

} // namespace prfaas

#include "prfaas/runtime/zmq_wire.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
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

void release_string(void*, void* hint) {
  delete static_cast<std::string*>(hint);
}

} // namespace

zmq_wire::zmq_wire(zmq::context_t& ctx, std::string self, std::string bind_endpoint,
                   std::map<std::string, std::string> peers, transport_config cfg,
                   logger_ptr log)
  : self_(std::move(self)),
    peer_endpoints_(std::move(peers)),
    cfg_(cfg),
    log_(std::move(log)),
    router_(ctx, zmq::socket_type::router) {
  peer_endpoints_.erase(self_);
  router_.set(zmq::sockopt::routing_id, self_);
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_.set(zmq::sockopt::router_handover, 1);
  router_.set(zmq::sockopt::immediate, 1);
  router_.set(zmq::sockopt::linger, to_ms(cfg_.linger));
  router_.set(zmq::sockopt::sndhwm, static_cast<int>(cfg_.send_hwm));
  router_.set(zmq::sockopt::rcvhwm, static_cast<int>(cfg_.receive_hwm));
  router_.set(zmq::sockopt::heartbeat_ivl, to_ms(cfg_.zmq_heartbeat_interval));
  router_.set(zmq::sockopt::heartbeat_timeout, to_ms(cfg_.zmq_heartbeat_timeout));
  router_.set(zmq::sockopt::heartbeat_ttl, to_ms(cfg_.zmq_heartbeat_timeout));
  // A hard cap well above our own limits: protects memory; our limits are counted.
  router_.set(zmq::sockopt::maxmsgsize,
              static_cast<int64_t>(std::max(cfg_.max_bulk_bytes, cfg_.max_envelope_bytes) * 2));
  router_.set(zmq::sockopt::reconnect_ivl, 100);
  router_.set(zmq::sockopt::reconnect_ivl_max, 1000);
  router_.bind(bind_endpoint);
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  for (auto& [name, ep] : peer_endpoints_) {
    queues_[name].routing_id = name;
    if (self_ < name)
      router_.connect(ep); // the other side accepts; ZeroMQ reconnects after failures
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw std::runtime_error("zmq_wire: eventfd failed");
}

zmq_wire::~zmq_wire() {
  stop();
  if (wake_fd_ >= 0)
    ::close(wake_fd_);
}

void zmq_wire::start(inbound_handler on_frame, drop_handler on_drop) {
  on_frame_ = std::move(on_frame);
  on_drop_ = std::move(on_drop);
  io_ = std::thread{[this] { run(); }};
}

void zmq_wire::stop() {
  if (stopped_.exchange(true))
    return;
  stop_ = true;
  wake();
  if (io_.joinable())
    io_.join();
  router_.close();
}

void zmq_wire::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
}

size_t zmq_wire::backlog() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return queued_;
}

send_status zmq_wire::send(const std::string& peer, std::string header, bulk_ptr bulk) {
  if (stop_)
    return send_status::stopped;
  bool was_empty;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = queues_.find(peer);
    if (i == queues_.end())
      return send_status::unknown_peer;
    auto& items = i->second.items;
    if (items.size() >= cfg_.outbound_queue) {
      if (cfg_.overflow == overflow_policy::drop_newest)
        return send_status::overflow;
      items.pop_front(); // drop_oldest: the caller's message goes in, the oldest is lost
      --queued_;
    }
    was_empty = queued_ == 0;
    items.push_back({std::move(header), std::move(bulk)});
    ++queued_;
  }
  if (was_empty)
    wake();
  return send_status::queued;
}

void zmq_wire::run() {
  bool backlog = false;
  while (!stop_) {
    std::array<zmq::pollitem_t, 2> items{{
      {router_.handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, wake_fd_, ZMQ_POLLIN, 0},
    }};
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(backlog ? 1 : 50));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM)
        break;
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(wake_fd_, &v, sizeof(v));
    }
    bool more_in = drain_inbound();
    bool more_out = drain_outbound();
    backlog = more_in || more_out;
  }
}

bool zmq_wire::drain_outbound() {
  // Take everything queued; what ZeroMQ refuses (HWM) goes back to the front.
  std::map<std::string, std::deque<outbound>> batch;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (queued_ == 0)
      return false;
    for (auto& [name, q] : queues_)
      if (!q.items.empty())
        batch[name].swap(q.items);
    queued_ = 0;
  }
  bool left = false;
  for (auto& [name, items] : batch) {
    const auto& rid = queues_.at(name).routing_id; // immutable after construction
    while (!items.empty()) {
      auto& o = items.front();
      try {
        auto flags = zmq::send_flags::dontwait | zmq::send_flags::sndmore;
        if (!router_.send(zmq::buffer(rid), flags)) {
          break; // HWM: keep the rest for the next round
        }
        auto* h = new std::string(std::move(o.header));
        zmq::message_t hm(h->data(), h->size(), release_string, h);
        if (o.bulk) {
          router_.send(hm, zmq::send_flags::sndmore);
          auto* b = new bulk_ptr(std::move(o.bulk));
          zmq::message_t bm(const_cast<std::byte*>((*b)->data()), (*b)->size(), release_bulk, b);
          router_.send(bm, zmq::send_flags::none);
        } else {
          router_.send(hm, zmq::send_flags::none);
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH) {
          // ROUTER_MANDATORY: the peer is not connected. The transport above retries
          // requests; one-way messages are lost, as documented.
          on_drop_(drop_reason::unreachable);
          log_->debug("wire_unreachable peer={}", name);
        } else {
          log_->warn("wire_send_failed peer={} error={}", name, e.what());
        }
      }
      items.pop_front();
    }
    if (!items.empty()) {
      left = true;
      std::lock_guard<std::mutex> guard{mtx_};
      auto& q = queues_[name].items;
      queued_ += items.size();
      while (!items.empty()) {
        q.push_front(std::move(items.back()));
        items.pop_back();
      }
    }
  }
  return left;
}

bool zmq_wire::drain_inbound() {
  constexpr int batch_limit = 4096;
  for (int n = 0; n < batch_limit && !stop_; ++n) {
    zmq::message_t id;
    auto r = router_.recv(id, zmq::recv_flags::dontwait);
    if (!r)
      return false;
    std::vector<zmq::message_t> parts;
    while (router_.get(zmq::sockopt::rcvmore)) {
      zmq::message_t part;
      if (!router_.recv(part, zmq::recv_flags::none))
        break;
      parts.push_back(std::move(part));
    }
    inbound_frame f;
    f.peer = std::string_view{static_cast<const char*>(id.data()), id.size()};
    f.parts = parts.size();
    if (!parts.empty()) {
      f.header = static_cast<const std::byte*>(parts[0].data());
      f.header_size = parts[0].size();
    }
    if (parts.size() >= 2)
      f.bulk = std::make_shared<zmq_bulk>(std::move(parts[1]));
    on_frame_(f);
  }
  return true;
}

} // namespace prfaas

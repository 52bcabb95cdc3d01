// The data plane's bulk path: CHUNK frames on plain TCP connections of their own.
//
// libzmq 4.3 allocates every message it receives, with no way to hand it a buffer, so
// a chunk arriving on ZeroMQ costs an allocation, a copy into a pool buffer, and (when
// the allocator returns that memory to the kernel) page faults. On the bulk path the
// receiver reads a payload straight into the receive pool buffer reserved for it and
// the sender writes it from the producer's buffer: the bytes cross the kernel once each
// way, as with plain TCP. Everything else — OPEN, ACK/NACK, DONE, CANCEL, CREDIT, and
// chunks when the bulk path is off or broken — stays on ZeroMQ.
//
// The receiver listens on an ephemeral port of the data endpoint's address and
// announces it in every answer to OPEN (flag_bulk, port in `total`). The sender opens
// one TCP connection beside each of its DEALERs to that peer and starts it with a hello
// naming that DEALER, so the receiver answers a bulk chunk on the DEALER whose
// connection index the sender recorded: acks stay in send order per connection, which
// the sender's loss detection relies on.
//
// On a connection, a hello: [u32 magic "PFDB"][u16 length][routing id], then frames:
// [u32 header length][u64 payload length][data-plane header (frame.hpp, kind CHUNK)]
// [payload]. A broken connection (reset, protocol error, or closed by the receiver:
// the sender reads its end, where nothing else ever arrives) is closed; its chunks are
// re-sent by the usual timers, on ZeroMQ until the peer announces its port again. A
// payload that stops arriving midway leaves the receive pool after 2 x chunk_timeout.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zmq_data_plane_impl.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas::detail {

namespace {

constexpr uint32_t hello_magic = 0x42444650; // "PFDB" read as little-endian u32
constexpr size_t prefix_bytes = sizeof(uint32_t) + sizeof(uint64_t);
constexpr size_t max_header_bytes = data_wire::fixed_header_bytes + 2 * data_wire::max_name_bytes;
/// Bytes read from one connection per pass of the loop: others (and the control
/// frames) get their turn.
constexpr size_t read_budget = 16u << 20;

/// "tcp://host:port" → host ("" for anything else); brackets of IPv6 removed.
std::string host_of(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0)
    return {};
  auto rest = endpoint.substr(6);
  auto colon = rest.rfind(':');
  if (colon == std::string::npos)
    return {};
  auto host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host;
}

/// No Nagle delay for a frame's tail; the kernel sizes the buffers (autotuning).
void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Bytes in the kernel's send queue of `fd`, not yet sent or not yet acknowledged by
/// the peer's TCP (0 if it cannot be asked).
uint64_t send_queue_bytes(int fd) {
  int q = 0;
  return ::ioctl(fd, SIOCOUTQ, &q) == 0 && q > 0 ? static_cast<uint64_t>(q) : 0;
}

/// Bytes went into the kernel: progress, and the queue level later drains count from.
void note_written(bulk_out& b) {
  b.progress = dp_clock::now();
  b.outq = send_queue_bytes(b.fd);
  b.outq_at = b.progress;
}

template <class T> void put(std::string& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T> T get(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

} // namespace

// -- receiver ------------------------------------------------------------------------

void zmq_data_plane_impl::bulk_listen() {
  if (!cfg_.bulk_tcp || cfg_.security)
    return;
  auto host = host_of(endpoint_);
  if (host.empty())
    return; // ipc:// or inproc://: no TCP, no bulk path
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host == "*" || host == "0.0.0.0" ? nullptr : host.c_str(), "0", &hints, &res) !=
      0) {
    log_->warn("data_bulk_off node={} reason=\"cannot resolve {}\"", cfg_.node, host);
    return;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 64) == 0;
  ::freeaddrinfo(res);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (ok)
    ok = ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (!ok) {
    log_->warn("data_bulk_off node={} reason=\"{}\"", cfg_.node, std::strerror(errno));
    if (fd >= 0)
      ::close(fd);
    return;
  }
  bulk_listen_fd_ = fd;
  bulk_port_ = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(a).sin6_port
                                             : reinterpret_cast<sockaddr_in&>(a).sin_port);
  log_->info("data_bulk_listening node={} port={}", cfg_.node, bulk_port_);
}

void zmq_data_plane_impl::bulk_accept() {
  for (;;) {
    int fd = ::accept4(bulk_listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; // EAGAIN, or an error the next poll retries
    tune(fd);
    auto c = std::make_unique<bulk_in>();
    c->fd = fd;
    c->need = sizeof(uint32_t) + sizeof(uint16_t);
    bulk_in_.push_back(std::move(c));
  }
}

bool zmq_data_plane_impl::bulk_read(bulk_in& c) {
  size_t budget = read_budget;
  char small[4096]; // hello, prefix and header bytes pass through here
  while (budget > 0) {
    if (c.at == bulk_in::part::payload) {
      const size_t remaining = c.payload_bytes - c.got;
      std::byte* into = nullptr;
      size_t want = remaining;
      if (c.discard) { // read through a bounded scratch buffer
        into = c.spill.data();
        want = std::min(remaining, c.spill.size());
      } else {
        into = (c.into ? c.into.data() : c.spill.data()) + c.got;
      }
      ssize_t n = ::recv(c.fd, into, std::min(want, budget), 0);
      if (n == 0)
        return false; // closed by the sender
      if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      budget -= static_cast<size_t>(n);
      bulk_payload_got(c, static_cast<size_t>(n));
      continue;
    }
    const size_t want = std::min(c.need - c.buf.size(), sizeof small);
    ssize_t n = ::recv(c.fd, small, want, 0);
    if (n == 0)
      return false;
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    budget -= static_cast<size_t>(n);
    c.buf.append(small, static_cast<size_t>(n));
    if (c.buf.size() < c.need)
      continue;
    switch (c.at) {
    case bulk_in::part::hello: {
      if (get<uint32_t>(c.buf, 0) != hello_magic)
        return false;
      auto id_len = get<uint16_t>(c.buf, 4);
      if (id_len == 0 || id_len > 255)
        return false;
      if (c.need == 6) { // the fixed part: now the routing id
        c.need += id_len;
        continue;
      }
      c.reply_to = c.buf.substr(6);
      c.at = bulk_in::part::prefix;
      c.need = prefix_bytes;
      c.buf.clear();
      continue;
    }
    case bulk_in::part::prefix: {
      auto header_len = get<uint32_t>(c.buf, 0);
      c.payload_bytes = get<uint64_t>(c.buf, 4);
      if (header_len < data_wire::fixed_header_bytes || header_len > max_header_bytes ||
          c.payload_bytes > cfg_.max_chunk_bytes) {
        drop_frame(c.payload_bytes > cfg_.max_chunk_bytes ? "oversized" : "malformed");
        return false; // the stream cannot be followed any further
      }
      c.at = bulk_in::part::header;
      c.need = header_len;
      c.buf.clear();
      continue;
    }
    case bulk_in::part::header:
      if (!bulk_header_done(c))
        return false;
      if (c.payload_bytes == 0)
        bulk_payload_done(c);
      continue;
    case bulk_in::part::payload:
      break;
    }
  }
  return true;
}

void zmq_data_plane_impl::bulk_payload_got(bulk_in& c, size_t n) {
  c.got += n;
  c.progress = dp_clock::now();
  if (!c.discard) // a chunk arriving slowly: its transfer is not quiet
    if (auto it = inbound_.find({c.h.source, c.h.id}); it != inbound_.end())
      touch(it->second, c.progress);
  if (c.got == c.payload_bytes)
    bulk_payload_done(c);
}

bool zmq_data_plane_impl::bulk_header_done(bulk_in& c) {
  data_wire::decode_error err;
  auto h = data_wire::decode(reinterpret_cast<const std::byte*>(c.buf.data()), c.buf.size(), err);
  c.buf.clear();
  if (!h || h->k != data_wire::kind::chunk || h->source.empty()) {
    drop_frame("malformed");
    return false; // the connection is closed
  }
  if (!source_current(*h))
    return false; // a stale or fenced sender's connection: closed
  c.h = std::move(*h);
  c.at = bulk_in::part::payload;
  c.got = 0;
  c.progress = dp_clock::now();
  c.discard = true;
  const zmq::message_t to(c.reply_to.data(), c.reply_to.size());
  auto* in = chunk_target(to, c.h);
  if (in != nullptr)
    path_counter("tcp").Increment();
  if (in != nullptr && may_land(*in, c.h.index)) {
    c.discard = false;
    if (rx_pool_ && c.payload_bytes <= rx_pool_->buffer_bytes())
      c.into = rx_pool_->try_acquire();
    if (!c.into)
      c.spill.resize(c.payload_bytes); // no pool, or larger than a buffer
    return true;
  }
  c.spill.resize(std::min<uint64_t>(c.payload_bytes, 1u << 20)); // scratch
  return true;
}

bool zmq_data_plane_impl::bulk_release_stalled(dp_clock::time_point now, dp_clock::duration quiet) {
  // A sender paused, or a path cut, mid-payload: the connection may resume (or never
  // close, if the peer is gone without a trace), but the pool buffer it was reading
  // into should not wait with it.
  bool released = false;
  for (auto& c : bulk_in_) {
    if (c->at != bulk_in::part::payload || !c->into || now - c->progress < quiet)
      continue;
    c->spill.assign(c->into.data(), c->into.data() + c->got);
    c->spill.resize(c->payload_bytes);
    c->into = pool_buffer{};
    released = true;
  }
  return released;
}

void zmq_data_plane_impl::bulk_payload_done(bulk_in& c) {
  c.at = bulk_in::part::prefix;
  c.need = prefix_bytes;
  const zmq::message_t to(c.reply_to.data(), c.reply_to.size());
  auto spill = std::move(c.spill);
  c.spill = {};
  if (c.discard) {
    // Not taken (unknown, delivered, repeated: answered at its header; or no buffer):
    // a chunk read without a buffer to keep it is re-sent later, like one lost.
    auto it = inbound_.find({c.h.source, c.h.id});
    if (it != inbound_.end() && !it->second.delivered && !it->second.has(c.h.index))
      drop_frame("no_credit");
    return;
  }
  auto it = inbound_.find({c.h.source, c.h.id});
  if (it == inbound_.end() || it->second.delivered || it->second.has(c.h.index)) {
    c.into = pool_buffer{}; // the transfer ended, or another copy arrived meanwhile
    return;
  }
  bulk_ptr landed;
  if (c.into) {
    c.into.resize(c.payload_bytes);
    landed = std::move(c.into).share();
  } else {
    landed = make_bulk(std::move(spill));
  }
  // Moved in: once the sink lets go of it, the buffer is free for the grants that
  // chunk_accept makes.
  const auto* data = landed->data();
  const auto size = landed->size();
  chunk_accept(to, c.h, it->second, data, size, std::move(landed));
}

// -- sender --------------------------------------------------------------------------

void zmq_data_plane_impl::bulk_announced(dp_peer& p, uint16_t port) {
  if (!cfg_.bulk_tcp || cfg_.security || port == 0)
    return;
  if (p.bulk_port == port && !p.bulk.empty())
    return;
  for (size_t k = 0; k < p.bulk.size(); ++k)
    if (p.bulk[k].fd >= 0)
      ::close(p.bulk[k].fd);
  p.bulk.assign(p.conns.size(), bulk_out{});
  p.bulk_port = 0;
  auto host = host_of(p.endpoint);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (host.empty() ||
      ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) {
    log_->warn("data_bulk_unreachable peer={} endpoint={}", p.name, p.endpoint);
    return;
  }
  for (size_t k = 0; k < p.bulk.size(); ++k) {
    int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      break;
    tune(fd);
    if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      continue;
    }
    auto& b = p.bulk[k];
    b.fd = fd;
    // The hello names DEALER k: the receiver answers this connection's chunks there.
    auto id = cfg_.node + "/" + std::to_string(k) + "/" + identity_nonce_;
    std::string hello(6 + id.size(), '\0');
    put<uint32_t>(hello, 0, hello_magic);
    put<uint16_t>(hello, 4, static_cast<uint16_t>(id.size()));
    std::memcpy(hello.data() + 6, id.data(), id.size());
    b.queue.push_back({std::move(hello), nullptr, 0});
  }
  ::freeaddrinfo(res);
  p.bulk_port = port;
  log_->info("data_bulk_connecting peer={} port={} connections={}", p.name, port, p.bulk.size());
}

bool zmq_data_plane_impl::bulk_send(dp_peer& p, size_t conn, const data_wire::header& h,
                                    const chunk_bytes& payload) {
  if (p.bulk_port == 0 || conn >= p.bulk.size() || p.bulk[conn].fd < 0)
    return false;
  auto head = encode_ours(h);
  std::string frame(prefix_bytes + head.size(), '\0');
  put<uint32_t>(frame, 0, static_cast<uint32_t>(head.size()));
  put<uint64_t>(frame, 4, payload ? payload->size() : 0);
  std::memcpy(frame.data() + prefix_bytes, head.data(), head.size());
  p.bulk[conn].queue.push_back({std::move(frame), payload, 0});
  bulk_flush(p, conn);
  return true;
}

void zmq_data_plane_impl::bulk_flush(dp_peer& p, size_t conn) {
  auto& b = p.bulk[conn];
  while (b.fd >= 0 && !b.queue.empty()) {
    // Several frames per call: headers and payloads, in order.
    iovec iov[16];
    int n = 0;
    for (auto& f : b.queue) {
      if (n + 2 > 16)
        break;
      size_t at = f.written;
      if (at < f.head.size()) {
        iov[n++] = {f.head.data() + at, f.head.size() - at};
        at = f.head.size();
      }
      size_t payload = f.payload ? f.payload->size() : 0;
      size_t pat = at - f.head.size();
      if (pat < payload)
        iov[n++] = {const_cast<std::byte*>(f.payload->data()) + pat, payload - pat};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(b.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return; // POLLOUT brings us back
      if (errno == ENOTCONN && !b.connected)
        return; // still connecting
      return bulk_fail(p, conn, "write", errno);
    }
    b.connected = true;
    if (w > 0)
      note_written(b);
    auto left = static_cast<size_t>(w);
    while (left > 0 && !b.queue.empty()) {
      auto& f = b.queue.front();
      size_t total = f.head.size() + (f.payload ? f.payload->size() : 0);
      size_t take = std::min(left, total - f.written);
      f.written += take;
      left -= take;
      if (f.written == total)
        b.queue.pop_front(); // the payload reference goes: acked chunks return to the pool
    }
  }
}

dp_clock::time_point zmq_data_plane_impl::bulk_progress(dp_peer& p, size_t conn,
                                                        dp_clock::time_point now) {
  if (conn >= p.bulk.size() || p.bulk[conn].fd < 0)
    return {};
  auto& b = p.bulk[conn];
  // The kernel's queue, at most once per millisecond: asked only for chunks that look
  // overdue, so a healthy connection is never asked.
  if (now - b.outq_at >= std::chrono::milliseconds(1)) {
    b.outq_at = now;
    if (auto q = send_queue_bytes(b.fd); q < b.outq) {
      b.progress = now;
      b.outq = q;
    }
  }
  return b.progress;
}

void zmq_data_plane_impl::bulk_fail(dp_peer& p, size_t conn, const char* what, int err) {
  log_->warn("data_bulk_failed peer={} connection={} during={} error=\"{}\"", p.name, conn, what,
             std::strerror(err));
  probe_hit(metrics_, "data.bulk_fallback");
  // Back to ZeroMQ for everything: what was queued or in the kernel is lost and
  // re-sent by the timers; the next answer to an OPEN brings the bulk path back.
  for (auto& b : p.bulk)
    if (b.fd >= 0)
      ::close(b.fd);
  p.bulk.clear();
  p.bulk_port = 0;
}

// -- the loop ------------------------------------------------------------------------

void zmq_data_plane_impl::bulk_poll_items(std::vector<zmq::pollitem_t>& items) {
  bulk_poll_base_ = items.size();
  if (bulk_listen_fd_ >= 0)
    items.push_back({nullptr, bulk_listen_fd_, ZMQ_POLLIN, 0});
  for (auto& c : bulk_in_)
    items.push_back({nullptr, c->fd, ZMQ_POLLIN, 0});
  for (auto& [_, p] : peers_)
    for (auto& b : p->bulk)
      if (b.fd >= 0)
        items.push_back({nullptr, b.fd,
                         static_cast<short>(ZMQ_POLLIN | (b.queue.empty() ? 0 : ZMQ_POLLOUT)), 0});
}

void zmq_data_plane_impl::bulk_after_poll(const std::vector<zmq::pollitem_t>& items) {
  // By descriptor: what ran since the poll may have opened or closed connections.
  std::unordered_map<int, short> ready;
  for (size_t i = bulk_poll_base_; i < items.size(); ++i)
    if (items[i].revents != 0)
      ready[items[i].fd] = items[i].revents;
  if (ready.empty())
    return;
  auto events = [&](int fd) -> short {
    auto r = ready.find(fd);
    return r == ready.end() ? short{0} : r->second;
  };
  if (bulk_listen_fd_ >= 0 && (events(bulk_listen_fd_) & ZMQ_POLLIN))
    bulk_accept();
  for (size_t i = 0; i < bulk_in_.size();) {
    auto& c = *bulk_in_[i];
    bool ok = !(events(c.fd) & (ZMQ_POLLIN | ZMQ_POLLERR)) || bulk_read(c);
    if (ok) {
      ++i;
      continue;
    }
    ::close(c.fd);
    bulk_in_.erase(bulk_in_.begin() + static_cast<long>(i));
  }
  for (auto& [_, p] : peers_) {
    for (size_t k = 0; k < p->bulk.size(); ++k) {
      auto ev = p->bulk[k].fd >= 0 ? events(p->bulk[k].fd) : short{0};
      if (ev & ZMQ_POLLERR) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(p->bulk[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
        bulk_fail(*p, k, "connect", err != 0 ? err : ECONNRESET);
        break; // p->bulk is gone
      }
      if (ev & ZMQ_POLLIN) {
        // The receiver never writes here: readable means it closed the connection
        // (stopped, or refused a fenced sender) or broke the protocol. Left unread,
        // the descriptor would stay readable and the loop would spin until a write.
        char byte;
        ssize_t n = ::recv(p->bulk[k].fd, &byte, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          continue;
        bulk_fail(*p, k, n == 0 ? "close" : "read", n == 0 ? ECONNRESET : n > 0 ? EPROTO : errno);
        break; // p->bulk is gone
      }
      if (ev & ZMQ_POLLOUT)
        bulk_flush(*p, k);
    }
  }
}

void zmq_data_plane_impl::bulk_close_all() {
  for (auto& c : bulk_in_)
    if (c->fd >= 0)
      ::close(c->fd);
  bulk_in_.clear();
  for (auto& [_, p] : peers_) {
    for (auto& b : p->bulk)
      if (b.fd >= 0)
        ::close(b.fd);
    p->bulk.clear();
  }
  if (bulk_listen_fd_ >= 0)
    ::close(bulk_listen_fd_);
  bulk_listen_fd_ = -1;
}

} // namespace prfaas::detail

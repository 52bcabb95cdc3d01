// The ZeroMQ data plane: lifecycle, the I/O loop and the command queue. Sending lives
// in data_plane/sender.cpp, receiving in data_plane/receiver.cpp.

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "data_plane/zmq_data_plane_impl.hpp"
#include "prfaas/runtime/zmq_wire.hpp"

namespace prfaas {

namespace detail {

namespace {

/// ZeroMQ I/O threads: one per connection to the busiest peer, at most 4. Several
/// TCP streams only help if more than one thread moves their bytes.
int io_threads_for(const data_plane_config& cfg) {
  uint32_t most = cfg.default_link.connections;
  for (auto& [_, l] : cfg.links)
    most = std::max(most, l.connections);
  // More I/O threads than cores only add context switches (and delay the control
  // plane's thread): at most one per core.
  uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<uint32_t>(most, 1, std::min(4u, cores)));
}

std::string random_nonce() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Raises the calling thread's nice value by `steps` (Linux: per thread). Failure is
/// harmless (the thread keeps its priority), so it is ignored.
void lower_priority(int steps) {
  if (steps <= 0)
    return;
  auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0)
    (void)::setpriority(PRIO_PROCESS, tid, std::min(19, now + steps));
}

/// Pacing burst: 5 ms at the link rate, at least 64 KiB.
uint64_t burst_for(const data_link_config& l) {
  return std::max<uint64_t>(64u << 10, l.rate_bps / 8 / 200);
}

} // namespace

wake_signal::wake_signal() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd < 0)
    throw std::runtime_error(std::string{"data plane: eventfd: "} + std::strerror(errno));
}

wake_signal::~wake_signal() {
  ::close(fd);
}

void wake_signal::notify() const {
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void wake_signal::drain() const {
  uint64_t v = 0;
  (void)!::read(fd, &v, sizeof v);
}

dp_peer::dp_peer(std::string n, std::string ep, data_link_config l, dp_clock::time_point now,
                 double queue_delay_target_s)
    : name(std::move(n)), endpoint(std::move(ep)), link(l), bucket(l.rate_bps, burst_for(l), now),
      delay(queue_delay_target_s) {
  report.peer = name;
}

zmq_data_plane_impl::zmq_data_plane_impl(data_plane_config cfg, metrics& m, logger_ptr log,
                                         std::shared_ptr<dp_sim_port> sim)
    : cfg_(std::move(cfg)), metrics_(m), log_(log ? std::move(log) : make_null_logger()),
      identity_nonce_(random_nonce()), ctx_(io_threads_for(cfg_)), rng_(cfg_.faults.seed),
      sim_(std::move(sim)) {
  if (cfg_.default_link.connections == 0)
    cfg_.default_link.connections = 1;
  for (auto& [_, l] : cfg_.links)
    l.connections = std::max<uint32_t>(l.connections, 1);
  if (cfg_.window_chunks == 0)
    cfg_.window_chunks = 1;
  faults_on_ = cfg_.faults.seed != 0;
  if (sim_) {
    // No sockets: frames go through the port. The routing ids are a function of the
    // incarnation (a run is a function of its seed); producers never wait on a send
    // pool (nothing may block in virtual time); no TCP bulk path, no CURVE.
    identity_nonce_ = std::to_string(cfg_.incarnation);
    cfg_.bulk_tcp = false;
    cfg_.security = nullptr;
    cfg_.send_pool.buffers = 0;
    cfg_.queue_delay_target = duration{0};
  }
  // The first socket starts the context's I/O threads, which inherit the nice value
  // of the thread that creates it: create it from a thread running `nice` steps below
  // us, so bulk transfers yield the CPU to the control plane (heartbeats, requests).
  if (!sim_)
    std::thread{[this] {
      lower_priority(cfg_.nice);
      router_ = zmq::socket_t{ctx_, zmq::socket_type::router};
    }}.join();
  wake_ = std::make_shared<wake_signal>();
  if (cfg_.receive_pool.buffers > 0) {
    rx_pool_ = buffer_pool::create(cfg_.receive_pool, cfg_.node + ".receive");
    rx_pool_->on_release(
        [w = std::weak_ptr<wake_signal>(wake_), port = std::weak_ptr<dp_sim_port>(sim_)] {
          if (auto s = w.lock()) {
            // One wake per burst of releases: the loop regrants for all of them.
            if (!s->released.exchange(true)) {
              if (auto p = port.lock())
                p->wake_at(p->now());
              else
                s->notify();
            }
          }
        });
  }
  if (cfg_.send_pool.buffers > 0)
    tx_pool_ = buffer_pool::create(cfg_.send_pool, cfg_.node + ".send");
  if (rx_pool_) {
    rx_reserved_gauge_ = &metrics_.gauge(
        "prfaas_data_receive_buffers_reserved",
        "Receive pool buffers set aside for chunks granted to senders and not yet arrived");
    rx_taken_gauge_ = &metrics_.gauge(
        "prfaas_data_receive_buffers_taken",
        "Receive pool buffers holding chunks (arriving, or waiting for an earlier one)");
  }
}

zmq_data_plane_impl::~zmq_data_plane_impl() {
  stop();
  if (io_.joinable()) // stop() was called from a handler, on the I/O thread itself
    io_.join();
}

void zmq_data_plane_impl::configure(zmq::socket_t& s) {
  s.set(zmq::sockopt::linger, 100);
  // Credit bounds what we queue; the high-water marks only must not bite first.
  s.set(zmq::sockopt::sndhwm, 100000);
  s.set(zmq::sockopt::rcvhwm, 100000);
  s.set(zmq::sockopt::sndbuf, 4 << 20);
  s.set(zmq::sockopt::rcvbuf, 4 << 20);
  zmq_liveness(s, transport_config{}); // TCP keepalive; no ZMTP pings (see there)
  // A hard cap well above our limit protects memory; our own limit is counted.
  s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(cfg_.max_chunk_bytes * 2 + (1 << 20)));
}

void zmq_data_plane_impl::start() {
  if (started_.exchange(true))
    return;
  if (sim_) {
    endpoint_ = "sim://" + cfg_.node + "/data";
    log_->info("data_plane_started node={} endpoint={} peers={} simulated=true", cfg_.node,
               endpoint_, cfg_.peers.size());
    wake(); // commands queued before the start
    return;
  }
  configure(router_);
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_.set(zmq::sockopt::router_handover, 1);
  if (cfg_.security) {
    zap_ = curve_server(ctx_, router_, cfg_.security, "data");
    monitor_ = std::make_unique<handshake_monitor>(ctx_, router_, cfg_.security, "data");
  }
  try {
    router_.bind(cfg_.bind);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("data plane: cannot bind " + cfg_.bind + ": " + e.what());
  }
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  bulk_listen();
  log_->info("data_plane_started node={} endpoint={} peers={}", cfg_.node, endpoint_,
             cfg_.peers.size());
  io_ = std::thread{[this] {
    pthread_setname_np(pthread_self(), "prfaas.data");
    lower_priority(cfg_.nice);
    run();
  }};
}

void zmq_data_plane_impl::stop() {
  if (stopped_.exchange(true))
    return;
  stop_ = true;
  if (sim_ && started_) {
    if (!in_turn_) // from a handler, the turn that ran it shuts down when it ends
      shutdown_io();
    return;
  }
  wake_->notify();
  if (io_.joinable()) {
    if (io_.get_id() == std::this_thread::get_id())
      return; // from a handler: the loop ends after this round; the destructor joins
    io_.join();
    return;
  }
  // Never started: nothing ran; fail what was queued here.
  std::deque<dp_command> left;
  {
    std::lock_guard<std::mutex> guard{cmd_mtx_};
    closed_ = true;
    left.swap(commands_);
  }
  for (auto& c : left)
    if (c.what == dp_command::op::open && c.done)
      c.done(transfer_outcome{c.id, false, "stopped", {}});
}

std::string zmq_data_plane_impl::local_endpoint() const {
  return endpoint_;
}

// -- commands -----------------------------------------------------------------------

void zmq_data_plane_impl::enqueue(dp_command c) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard{cmd_mtx_};
    if (!closed_) {
      wake = commands_.empty();
      commands_.push_back(std::move(c));
      c.what = dp_command::op::push; // moved into the queue: nothing to fail below
      c.done = nullptr;
    }
  }
  if (wake)
    this->wake();
  // The I/O thread is gone: an open still owes its caller a `done`.
  if (c.what == dp_command::op::open && c.done)
    c.done(transfer_outcome{c.id, false, "stopped", {}});
}

void zmq_data_plane_impl::open(uint64_t id, const std::string& peer, const std::string& sink,
                               std::string meta, done_handler done) {
  dp_command c;
  c.what = dp_command::op::open;
  c.id = id;
  c.peer = peer;
  c.sink = sink;
  c.meta = std::move(meta);
  c.done = std::move(done);
  c.at = clock_now();
  enqueue(std::move(c));
}

void zmq_data_plane_impl::push(uint64_t id, bulk_ptr chunk) {
  dp_command c;
  c.what = dp_command::op::push;
  c.id = id;
  if (!chunk)
    chunk = make_bulk(std::string{});
  // The checksum is computed here, on the producer's thread, not on the I/O thread.
  c.checksum = data_wire::checksum(chunk->data(), chunk->size());
  c.chunk = std::move(chunk);
  c.at = clock_now(); // the producer's progress keeps the transfer alive (transfer_timeout)
  enqueue(std::move(c));
}

void zmq_data_plane_impl::finish(uint64_t id) {
  dp_command c;
  c.what = dp_command::op::finish;
  c.id = id;
  c.at = clock_now();
  enqueue(std::move(c));
}

void zmq_data_plane_impl::cancel(uint64_t id) {
  dp_command c;
  c.what = dp_command::op::cancel;
  c.id = id;
  enqueue(std::move(c));
}

void zmq_data_plane_impl::process_commands() {
  std::deque<dp_command> batch;
  {
    std::lock_guard<std::mutex> guard{cmd_mtx_};
    batch.swap(commands_);
  }
  for (auto& c : batch) {
    switch (c.what) {
    case dp_command::op::open:
      on_open(c);
      break;
    case dp_command::op::push:
      on_push(c);
      break;
    case dp_command::op::finish:
      on_finish(c);
      break;
    case dp_command::op::cancel:
      on_cancel(c);
      break;
    }
  }
}

void zmq_data_plane_impl::add_stream_sink(const std::string& sink, stream_handlers handlers) {
  std::lock_guard<std::mutex> guard{sinks_mtx_};
  sinks_[sink] = std::make_shared<stream_handlers>(std::move(handlers));
}

void zmq_data_plane_impl::remove_sink(const std::string& sink) {
  std::lock_guard<std::mutex> guard{sinks_mtx_};
  sinks_.erase(sink);
}

// -- the loop ------------------------------------------------------------------------

std::optional<dp_clock::duration> zmq_data_plane_impl::next_wake(dp_clock::time_point now) const {
  using namespace std::chrono;
  dp_clock::duration wait = milliseconds(100); // idle: stop() wakes us anyway
  if (!outbound_.empty())
    wait = milliseconds(10); // re-send and transfer timers
  if (pacing_wait_)
    wait = std::min(wait, *pacing_wait_);
  if (!delayed_.empty())
    wait = std::min(
        wait, std::max<dp_clock::duration>(delayed_.front().due - now, dp_clock::duration{0}));
  if (blocked_)
    wait = std::min<dp_clock::duration>(wait, milliseconds(1));
  return wait;
}

void zmq_data_plane_impl::wake() {
  if (sim_)
    sim_->wake_at(sim_->now());
  else
    wake_->notify();
}

void zmq_data_plane_impl::run() {
  std::vector<zmq::pollitem_t> items;
  while (!stop_) {
    auto now = clock_now();
    items.clear();
    items.push_back({nullptr, wake_->fd, ZMQ_POLLIN, 0});
    items.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
    if (monitor_)
      items.push_back(monitor_->poll_item());
    for (auto& [_, p] : peers_)
      for (auto& c : p->conns)
        items.push_back({c.socket.handle(), 0, ZMQ_POLLIN, 0});
    bulk_poll_items(items);
    auto wait = *next_wake(now);
    // Round up so that a wait of 0.3 ms does not become a busy loop of 0 ms polls.
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait);
    try {
      zmq::poll(items.data(), items.size(), ms);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM)
        break;
      if (e.num() != EINTR)
        log_->warn("data_poll_failed error={}", e.what());
      continue;
    }
    if (items[0].revents & ZMQ_POLLIN)
      wake_->drain();
    if (monitor_ && (items[2].revents & ZMQ_POLLIN))
      monitor_->drain();
    step(&items);
  }
  shutdown_io();
}

void zmq_data_plane_impl::step(const std::vector<zmq::pollitem_t>* items) {
  process_commands();
  drain_inbound();
  if (items != nullptr)
    bulk_after_poll(*items);
  if (wake_->released.exchange(false))
    regrant();
  for (auto& [_, p] : peers_)
    for (size_t i = 0; i < p->conns.size(); ++i)
      drain_replies(*p, i);
  auto now = clock_now();
  flush_delayed(now);
  control_delay(now);
  check_timeouts(now);
  pump(now);
  if (now - last_expiry_ >= std::chrono::milliseconds(100)) {
    expire_inbound(now);
    release_idle(now);
    last_expiry_ = now;
  }
  publish_links(now);
}

void zmq_data_plane_impl::shutdown_io() {
  std::deque<dp_command> left;
  {
    std::lock_guard<std::mutex> guard{cmd_mtx_};
    closed_ = true;
    left.swap(commands_);
  }
  for (auto& c : left)
    if (c.what == dp_command::op::open && c.done)
      c.done(transfer_outcome{c.id, false, "stopped", {}});
  std::vector<uint64_t> ids;
  for (auto& [id, _] : outbound_)
    ids.push_back(id);
  for (auto id : ids)
    complete(id, false, "stopped", "stopped");
  publish_links(clock_now(), true);
  for (auto& [_, p] : peers_)
    for (auto& c : p->conns)
      c.socket.close();
  bulk_close_all();
  monitor_.reset(); // stops monitoring while the socket is open; closes its PAIR
  router_.close();
  inbound_.clear();
  delayed_.clear();
  log_->info("data_plane_stopped node={}", cfg_.node);
}

// -- peers ---------------------------------------------------------------------------

dp_peer* zmq_data_plane_impl::peer_for(const std::string& name) {
  auto i = peers_.find(name);
  if (i != peers_.end())
    return i->second.get();
  auto ep = cfg_.peers.find(name);
  if (ep == cfg_.peers.end())
    return nullptr;
  auto l = cfg_.links.find(name);
  auto link = l == cfg_.links.end() ? cfg_.default_link : l->second;
  auto p =
      std::make_unique<dp_peer>(name, ep->second, link, clock_now(),
                                std::chrono::duration<double>(cfg_.queue_delay_target).count());
  auto& bh = cfg_.faults.blackhole_peers;
  p->blackhole = std::find(bh.begin(), bh.end(), name) != bh.end();
  prometheus::Labels lbl{{"peer", name}};
  p->bytes_sent = &metrics_.counter("prfaas_data_bytes_sent_total",
                                    "Data-plane payload bytes sent, re-sends included", lbl);
  p->chunks_sent = &metrics_.counter("prfaas_data_chunks_sent_total",
                                     "Data-plane chunk transmissions, re-sends included", lbl);
  p->retransmits = &metrics_.counter("prfaas_data_retransmits_total",
                                     "Data-plane chunks sent again (timeout, loss or nack)", lbl);
  p->in_flight_gauge = &metrics_.gauge("prfaas_data_bytes_in_flight",
                                       "Data-plane bytes sent and not yet acknowledged", lbl);
  p->queued_gauge = &metrics_.gauge(
      "prfaas_data_bytes_queued", "Data-plane bytes pushed and waiting for credit or pacing", lbl);
  return peers_.emplace(name, std::move(p)).first->second.get();
}

void zmq_data_plane_impl::connect(dp_peer& p) {
  for (uint32_t k = 0; k < p.link.connections; ++k) {
    dp_connection c;
    if (sim_) { // frames go through the port, addressed by peer and connection
      p.conns.push_back(std::move(c));
      continue;
    }
    c.socket = zmq::socket_t{ctx_, zmq::socket_type::dealer};
    configure(c.socket);
    // Unique per connection and per instance: a restarted node never hands over
    // (steals) the live connections of another instance of the same name.
    c.socket.set(zmq::sockopt::routing_id, routing_id_of(k));
    c.socket.set(zmq::sockopt::immediate, 1); // no queueing into a connection not yet up
    c.socket.set(zmq::sockopt::reconnect_ivl, 100);
    c.socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
    if (cfg_.security)
      curve_client(c.socket, *cfg_.security, p.name);
    c.socket.connect(p.endpoint);
    p.conns.push_back(std::move(c));
  }
  log_->info("data_peer_connecting peer={} endpoint={} connections={} rate_bps={}", p.name,
             p.endpoint, p.link.connections, p.link.rate_bps);
}

std::vector<size_t> zmq_data_plane_impl::by_load(const dp_peer& p) const {
  std::vector<size_t> idx(p.conns.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return p.conns[a].in_flight_bytes < p.conns[b].in_flight_bytes;
  });
  return idx;
}

// -- timeouts ------------------------------------------------------------------------

std::string zmq_data_plane_impl::fail_detail(const outbound_transfer& t) const {
  std::string s = "transfer " + std::to_string(t.id) + " to " + t.peer + "/" + t.sink +
                  " not confirmed within " + format_duration(cfg_.transfer_timeout) +
                  " of its producer's last step: ";
  if (!t.accepted)
    return s + "the peer never answered OPEN";
  s += std::to_string(t.acked) + "/" + std::to_string(t.chunks.size()) + " chunks acknowledged";
  for (size_t i = 0; i < t.chunks.size(); ++i)
    if (t.chunks[i].st != out_chunk::state::acked) {
      s += ", chunk " + std::to_string(i) + " unacknowledged";
      break;
    }
  if (!t.finished)
    s += ", not finished by the producer";
  // Why it stalled: the receiver's grant, what is out, and the path the chunks take.
  s += "; granted " + std::to_string(t.limit) + ", sent " + std::to_string(t.next) + ", " +
       std::to_string(t.in_flight.size()) + " in flight, " + std::to_string(t.stats.retransmits) +
       " re-sent";
  if (auto p = peers_.find(t.peer); p != peers_.end())
    s += p->second->bulk_port != 0 ? ", chunks on tcp" : ", chunks on zmq";
  return s;
}

void zmq_data_plane_impl::check_timeouts(dp_clock::time_point now) {
  std::vector<uint64_t> late;
  for (auto& [id, t] : outbound_)
    if (now >= t.deadline)
      late.push_back(id);
  for (auto id : late)
    complete(id, false, "timeout: " + fail_detail(outbound_.at(id)), "timeout");
}

// -- bookkeeping ---------------------------------------------------------------------

void zmq_data_plane_impl::drop_frame(const char* reason) {
  auto i = dropped_.find(reason);
  if (i == dropped_.end())
    i = dropped_
            .emplace(reason, &metrics_.counter("prfaas_data_dropped_frames_total",
                                               "Data-plane frames dropped, by reason",
                                               {{"reason", reason}}))
            .first;
  i->second->Increment();
  log_->debug("data_frame_dropped reason={}", reason);
}

bool zmq_data_plane_impl::authentic(const data_wire::header& h, zmq::message_t& head) {
  // With CURVE, a frame must name as its source the node its connection authenticated
  // as (the ZAP handler's user id), as on the control plane.
  if (!zap_)
    return true;
  const char* user = zmq_msg_gets(head.handle(), "User-Id");
  if (user != nullptr && h.source == user)
    return true;
  log_->warn("data_frame_impersonation claimed={} authenticated={}", h.source,
             user ? user : "(none)");
  drop_frame("impersonation");
  return false;
}

bool zmq_data_plane_impl::source_current(const data_wire::header& h) {
  if (!cfg_.epochs)
    return true;
  switch (cfg_.epochs->judge(h.source, h.incarnation)) {
  case peer_epochs::verdict::stale:
    drop_frame("stale_source");
    return false;
  case peer_epochs::verdict::fenced:
    drop_frame("fenced");
    return false;
  default:
    return true;
  }
}

} // namespace detail

data_plane_ptr make_zmq_data_plane(data_plane_config cfg, metrics& m, logger_ptr log) {
  return std::make_shared<detail::zmq_data_plane_impl>(std::move(cfg), m, std::move(log));
}

} // namespace prfaas

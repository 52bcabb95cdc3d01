// The real data plane in simulation: the ZeroMQ data plane's sender and receiver
// (credit, resume, NACK, re-send, fencing) with their sockets replaced by frames on
// the simulated fabric, in virtual time, on the simulation's one thread.
//
//   sim_frame_switch   one per fabric: the nodes' planes and the pipes between them
//   sim_port           one per plane: its clock, its turns, its sends (dp_sim_port)
//   sim_live_plane     the data_plane a node holds: defers calls made by engine jobs
//                      that run ahead of virtual time, then forwards to the real plane
//
// A frame occupies its pipe (the cluster link, or a node pair within a cluster) for
// its wire size over the pipe's capacity, first in first out, then takes the pair's
// latency; it is dropped when the pair is unreachable as it leaves or as it arrives,
// when the link's loss draws it, or when its destination plane is gone. Every draw
// comes from one generator seeded by set_live's seed: a run is a function of it.

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include "data_plane/zmq_data_plane_impl.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"
#include "prfaas/runtime/sim_time.hpp"
#include "sim_fabric_link.hpp"

namespace prfaas {

using detail::dp_sim_frame;
using detail::zmq_data_plane_impl;

// -- the fabric's frame-level helpers -----------------------------------------------

void sim_data_fabric::set_corrupt(const std::string& from, const std::string& to, double p) {
  link_between(from, to).corrupt = std::clamp(p, 0.0, 0.99);
}

sim_data_fabric::frame_path sim_data_fabric::path_of(const std::string& src,
                                                     const std::string& dst) {
  auto& l = link_of(src, dst);
  // Across clusters the transfers share the link; within one, each pair has its own.
  return {.pipe = l.shared ? l.from + "->" + l.to : src + "->" + dst,
          .capacity_bps = l.capacity_bps,
          .loss = l.loss,
          .corrupt = l.corrupt};
}

void sim_data_fabric::count_frame(const std::string& src, const std::string& dst, double wire_bytes,
                                  bool chunk) {
  auto& l = link_of(src, dst);
  l.delivered += wire_bytes;
  l.messages += chunk ? 1 : 0;
}

double sim_data_fabric::wire_bytes(const bulk_ptr& chunk) const {
  if (!chunk)
    return 0;
  return wire_size_ ? wire_size_({chunk->data(), chunk->size()})
                    : static_cast<double>(chunk->size());
}

// -- the switch ---------------------------------------------------------------------

class sim_frame_switch : public std::enable_shared_from_this<sim_frame_switch> {
public:
  sim_frame_switch(sim_data_fabric& fabric, uint64_t seed) : fabric_(fabric), rng_(seed) {}

  void attach(const std::string& node, const std::shared_ptr<zmq_data_plane_impl>& plane) {
    planes_[node] = plane;
  }

  /// A frame from `from`'s connection `conn` to `to`'s ROUTER.
  void send(const std::string& from, const std::string& to, dp_sim_frame f, bool chunk) {
    carry(from, to, std::move(f), chunk, [to](sim_frame_switch& sw, dp_sim_frame g) {
      if (auto p = sw.plane(to))
        p->sim_inbound(std::move(g));
    });
  }

  /// A reply from `from`'s ROUTER to the connection named by `f.identity`
  /// ("node/connection/nonce"); false when that connection does not exist.
  bool reply(const std::string& from, dp_sim_frame f) {
    auto a = f.identity.find('/');
    auto b = a == std::string::npos ? a : f.identity.find('/', a + 1);
    if (b == std::string::npos)
      return false;
    std::string to = f.identity.substr(0, a);
    size_t conn = std::stoul(f.identity.substr(a + 1, b - a - 1));
    auto p = plane(to);
    if (!p || p->routing_id_of(conn) != f.identity)
      return false; // that incarnation is gone: ROUTER_MANDATORY would refuse it
    std::string identity = f.identity;
    carry(from, to, std::move(f), false,
          [to, from, conn, identity](sim_frame_switch& sw, dp_sim_frame g) {
            if (auto q = sw.plane(to); q && q->routing_id_of(conn) == identity)
              q->sim_reply(from, conn, std::move(g));
          });
    return true;
  }

private:
  using deliver_fn = std::function<void(sim_frame_switch&, dp_sim_frame)>;

  std::shared_ptr<zmq_data_plane_impl> plane(const std::string& node) {
    auto it = planes_.find(node);
    return it == planes_.end() ? nullptr : it->second.lock();
  }

  bool draw(double p) { return p > 0 && std::uniform_real_distribution<double>{}(rng_) < p; }

  void carry(const std::string& from, const std::string& to, dp_sim_frame f, bool chunk,
             deliver_fn deliver) {
    auto& net = fabric_.net();
    if (!net.reachable(from, to))
      return;
    auto path = fabric_.path_of(from, to);
    const double wire =
        chunk ? fabric_.wire_bytes(f.payload)
              : static_cast<double>(f.head.size() + (f.payload ? f.payload->size() : 0));
    auto& timer = fabric_.timer();
    auto& free_at = pipes_[path.pipe];
    auto start = std::max(timer.now(), free_at);
    free_at = start + (path.capacity_bps > 0
                           ? std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::duration<double>(wire * 8 / path.capacity_bps))
                           : std::chrono::nanoseconds{0});
    if (draw(path.loss))
      return; // it took its time on the link, and vanished
    if (chunk && f.payload && f.payload->size() > 0 && draw(path.corrupt))
      f.payload = detail::corrupted_copy(*f.payload, rng_());
    timer.at(free_at + net.latency(from, to),
             [w = weak_from_this(), from, to, wire, chunk, f = std::move(f), deliver]() mutable {
               auto self = w.lock();
               if (!self || !self->fabric_.net().reachable(from, to))
                 return;
               self->fabric_.count_frame(from, to, wire, chunk);
               deliver(*self, std::move(f));
             });
  }

  sim_data_fabric& fabric_;
  std::mt19937_64 rng_;
  std::map<std::string, std::weak_ptr<zmq_data_plane_impl>> planes_; ///< node → current plane
  std::map<std::string, sim_timer::time_point> pipes_;               ///< pipe → free from
};

namespace {

/// One plane's clock, turns and sends.
class sim_port final : public detail::dp_sim_port {
public:
  sim_port(std::shared_ptr<sim_frame_switch> sw, sim_data_fabric& fabric, std::string node)
      : switch_(std::move(sw)), fabric_(fabric), node_(std::move(node)) {}

  void bind(std::weak_ptr<zmq_data_plane_impl> plane) { plane_ = std::move(plane); }

  detail::dp_clock::time_point now() const override { return fabric_.timer().now(); }

  void wake_at(detail::dp_clock::time_point t) override {
    t = std::max(t, now());
    if (next_ && *next_ <= t)
      return; // an earlier turn is due; it schedules the next one
    next_ = t;
    fabric_.timer().at(t, [w = weak_self_, t] {
      auto self = w.lock();
      if (!self || self->next_ != t)
        return; // superseded by an earlier turn
      self->next_.reset();
      if (auto p = self->plane_.lock())
        p->sim_turn();
    });
  }

  void send(const std::string& peer, size_t, dp_sim_frame f, bool chunk) override {
    if (auto sw = switch_.lock())
      sw->send(node_, peer, std::move(f), chunk);
  }

  bool reply(dp_sim_frame f) override {
    auto sw = switch_.lock();
    return sw && sw->reply(node_, std::move(f));
  }

  std::weak_ptr<sim_port> weak_self_;

private:
  std::weak_ptr<sim_frame_switch> switch_;
  sim_data_fabric& fabric_;
  std::string node_;
  std::weak_ptr<zmq_data_plane_impl> plane_;
  std::optional<detail::dp_clock::time_point> next_;
};

} // namespace

/// What a node holds. Engine jobs run ahead of virtual time (sim_time.hpp): their calls
/// are deferred to the instant the job reached, before any argument is moved.
class sim_live_plane final : public data_plane {
public:
  sim_live_plane(sim_data_fabric& fabric, std::shared_ptr<sim_port> port,
                 std::shared_ptr<zmq_data_plane_impl> impl)
      : fabric_(fabric), port_(std::move(port)), impl_(std::move(impl)) {}
  ~sim_live_plane() override { impl_->stop(); }

  void start() override { impl_->start(); }
  void stop() override { impl_->stop(); }

  void open(uint64_t id, const std::string& peer, const std::string& sink, std::string meta,
            done_handler done) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this, meta = std::move(meta), done = std::move(done)]() mutable {
        open(id, peer, sink, std::move(meta), std::move(done));
      });
      return;
    }
    impl_->open(id, peer, sink, std::move(meta), std::move(done));
  }

  using data_plane::push;
  void push(uint64_t id, bulk_ptr chunk) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this, chunk = std::move(chunk)]() mutable { push(id, std::move(chunk)); });
      return;
    }
    impl_->push(id, std::move(chunk));
  }

  void finish(uint64_t id) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this] { finish(id); });
      return;
    }
    impl_->finish(id);
  }

  void cancel(uint64_t id) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this] { cancel(id); });
      return;
    }
    impl_->cancel(id);
  }

  void add_stream_sink(const std::string& sink, stream_handlers handlers) override {
    impl_->add_stream_sink(sink, std::move(handlers));
  }
  void remove_sink(const std::string& sink) override { impl_->remove_sink(sink); }
  std::vector<data_link_report> links() const override { return impl_->links(); }
  std::string local_endpoint() const override { return impl_->local_endpoint(); }

  sim_data_fabric& fabric() { return fabric_; }

private:
  sim_data_fabric& fabric_;
  std::shared_ptr<sim_port> port_;
  std::shared_ptr<zmq_data_plane_impl> impl_;
};

data_plane_ptr sim_data_fabric::attach_live(data_plane_config cfg, metrics& m, logger_ptr log) {
  if (!switch_)
    switch_ = std::make_shared<sim_frame_switch>(*this, live_seed_);
  auto node = cfg.node;
  auto port = std::make_shared<sim_port>(switch_, *this, node);
  port->weak_self_ = port;
  auto impl = std::make_shared<zmq_data_plane_impl>(std::move(cfg), m, std::move(log), port);
  port->bind(impl);
  switch_->attach(node, impl);
  return std::make_shared<sim_live_plane>(*this, std::move(port), std::move(impl));
}

sim_data_fabric* live_fabric_of(data_plane* dp) {
  auto* p = dynamic_cast<sim_live_plane*>(dp);
  return p ? &p->fabric() : nullptr;
}

// -- the real plane's side ----------------------------------------------------------

namespace detail {

std::string zmq_data_plane_impl::routing_id_of(size_t conn) const {
  return cfg_.node + "/" + std::to_string(conn) + "/" + identity_nonce_;
}

void zmq_data_plane_impl::sim_inbound(dp_sim_frame f) {
  if (stop_)
    return;
  sim_inbound_.push_back(std::move(f));
  sim_->wake_at(sim_->now());
}

void zmq_data_plane_impl::sim_reply(const std::string& peer, size_t conn, dp_sim_frame f) {
  auto it = peers_.find(peer);
  if (stop_ || it == peers_.end() || conn >= it->second->conns.size())
    return;
  it->second->conns[conn].sim_in.push_back(std::move(f));
  sim_->wake_at(sim_->now());
}

void zmq_data_plane_impl::sim_turn() {
  if (stop_ || !started_)
    return;
  in_turn_ = true;
  step(nullptr);
  in_turn_ = false;
  if (stop_) { // a handler stopped the plane
    shutdown_io();
    return;
  }
  // Idle planes sleep: a command or a frame wakes them.
  if (outbound_.empty() && inbound_.empty() && delayed_.empty())
    return;
  auto now = sim_->now();
  sim_->wake_at(now + *next_wake(now));
}

} // namespace detail

} // namespace prfaas

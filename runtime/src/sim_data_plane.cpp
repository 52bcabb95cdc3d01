#include "prfaas/runtime/sim_data_plane.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <caf/all.hpp>

#include "sim_fabric_link.hpp"

namespace prfaas {

namespace {

using time_point = sim_timer::time_point;

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

/// Bytes left below this are rounding, not data (wire bytes are scaled doubles).
constexpr double drained_eps = 0.5;

} // namespace

/// One node's face of the fabric: the data_plane interface. Inside an engine job that
/// runs ahead of virtual time (sim_time.hpp) every call happens later, at the job's
/// instant: the current deferral is asked first, before arguments are moved.
class sim_data_plane final : public data_plane {
public:
  struct peer_stats {
    double sent = 0, acked = 0, retransmitted = 0;
    uint64_t retransmits = 0;
    double throughput_bps = 0;
    double last_acked = 0;
    time_point last_sample{};
  };

  sim_data_plane(std::shared_ptr<sim_data_fabric> fabric, data_plane_config cfg, logger_ptr log)
      : fabric_(std::move(fabric)), cfg_(std::move(cfg)), log_(std::move(log)) {}
  ~sim_data_plane() override { stop(); }

  void start() override { started_ = true; }

  void stop() override {
    if (!started_ || stopped_)
      return;
    stopped_ = true;
    sinks_.clear();
    fabric_->detach(this);
  }

  void open(uint64_t id, const std::string& peer, const std::string& sink, std::string meta,
            done_handler done) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this, meta = std::move(meta), done = std::move(done)]() mutable {
        open(id, peer, sink, std::move(meta), std::move(done));
      });
      return;
    }
    if (stopped_) {
      transfer_outcome out{.id = id, .ok = false, .error = "stopped"};
      done(std::move(out));
      return;
    }
    fabric_->open(this, id, peer, sink, std::move(meta), std::move(done), cfg_.transfer_timeout);
  }

  using data_plane::push;
  void push(uint64_t id, bulk_ptr chunk) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this, chunk = std::move(chunk)]() mutable { push(id, std::move(chunk)); });
      return;
    }
    if (!stopped_)
      fabric_->push(cfg_.node, id, chunk ? std::move(chunk) : make_bulk(std::string{}));
  }

  void finish(uint64_t id) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this] { finish(id); });
      return;
    }
    if (!stopped_)
      fabric_->finish(cfg_.node, id);
  }

  void cancel(uint64_t id) override {
    if (auto* d = effect_deferral::current()) {
      d->defer([=, this] { cancel(id); });
      return;
    }
    fabric_->cancel(cfg_.node, id, "cancelled");
  }

  void add_stream_sink(const std::string& sink, stream_handlers handlers) override {
    sinks_[sink] = std::move(handlers);
  }
  void remove_sink(const std::string& sink) override { sinks_.erase(sink); }

  std::vector<data_link_report> links() const override {
    std::vector<data_link_report> out;
    auto now = fabric_->timer().now();
    for (auto& [peer, st] : stats_) {
      auto& s = const_cast<peer_stats&>(st);
      // Acknowledged bits/s since the previous report, smoothed like the live plane's.
      if (s.last_sample != time_point{} && now > s.last_sample) {
        double inst = (s.acked - s.last_acked) * 8 / seconds(now - s.last_sample);
        s.throughput_bps = 0.7 * s.throughput_bps + 0.3 * inst;
      }
      s.last_sample = now;
      s.last_acked = s.acked;
      data_link_report r;
      r.peer = peer;
      r.bytes_sent = static_cast<uint64_t>(s.sent + s.retransmitted);
      r.bytes_acked = static_cast<uint64_t>(s.acked);
      r.retransmits = s.retransmits;
      r.throughput_bps = s.throughput_bps;
      r.updated = now;
      out.push_back(r);
    }
    fabric_->fill_backlog(cfg_.node, out);
    return out;
  }

  std::string local_endpoint() const override { return "sim://" + cfg_.node + "/data"; }

  const std::string& node() const { return cfg_.node; }
  sim_data_fabric& fabric() { return *fabric_; }
  bool stopped() const { return stopped_; }
  peer_stats& stats(const std::string& peer) { return stats_[peer]; }

  /// Hands a complete transfer to its sink (every chunk, then the end); false when
  /// nobody listens there.
  bool deliver(const std::string& sink, received_transfer rt) {
    auto it = sinks_.find(sink);
    if (stopped_ || it == sinks_.end())
      return false;
    auto h = it->second; // a handler may remove the sink
    const inbound_ref ref{rt.id, rt.source, rt.sink, rt.meta};
    auto chunks = std::move(rt.chunks);
    rt.chunks.clear();
    for (uint32_t i = 0; i < chunks.size(); ++i)
      if (h.chunk)
        h.chunk(ref, i, std::move(chunks[i]));
    if (h.end)
      h.end(std::move(rt));
    return true;
  }

private:
  std::shared_ptr<sim_data_fabric> fabric_;
  data_plane_config cfg_;
  logger_ptr log_;
  std::map<std::string, stream_handlers> sinks_;
  std::map<std::string, peer_stats> stats_;
  bool started_ = false;
  bool stopped_ = false;
};

struct sim_data_fabric::flow {
  std::string src, dst, sink, meta;
  uint64_t id = 0;
  data_plane::done_handler done;
  std::vector<bulk_ptr> chunks;
  uint64_t payload = 0; ///< bytes as pushed (unscaled), for transfer_stats
  double pushed = 0;    ///< wire bytes pushed
  double sent = 0;      ///< wire bytes through the link
  double rate = 0;      ///< wire bytes/s now
  bool finished = false;
  bool ended = false;                        ///< `done` called (or about to be)
  link* on = nullptr;                        ///< while on a link
  sim_data_plane* to = nullptr;              ///< the receiver's plane while one is attached
  sim_data_plane::peer_stats* out = nullptr; ///< the sender's statistics toward dst
  transfer_stats stats;
  time_point active{}; ///< the producer's last open, push or finish: the timeout counts from it
};

sim_data_fabric::sim_data_fabric(caf::actor_system& sys, sim_network* net)
    : net_(net), timer_(std::make_unique<sim_timer>(sys)) {}

sim_data_fabric::~sim_data_fabric() = default;

void sim_data_fabric::start_listening() {
  net_->on_change([w = weak_from_this()] {
    if (auto self = w.lock())
      self->reachability_changed();
  });
}

void sim_data_fabric::set_cluster(const std::string& node, const std::string& cluster) {
  cluster_[node] = cluster;
}

std::string sim_data_fabric::cluster_of(const std::string& node) const {
  auto it = cluster_.find(node);
  return it == cluster_.end() ? node : it->second;
}

sim_data_fabric::link& sim_data_fabric::link_between(const std::string& from,
                                                     const std::string& to) {
  auto& slot = links_[{from, to}];
  if (!slot) {
    slot = std::make_unique<link>();
    slot->from = from;
    slot->to = to;
    slot->shared = from != to;
    slot->capacity_bps = from == to ? local_rate_ : 0;
    slot->updated = timer_->now();
  }
  return *slot;
}

sim_data_fabric::link& sim_data_fabric::link_of(const std::string& src, const std::string& dst) {
  return link_between(cluster_of(src), cluster_of(dst));
}

void sim_data_fabric::set_link_rate(const std::string& from, const std::string& to, double bps) {
  auto& l = link_between(from, to);
  advance(l);
  l.capacity_bps = bps;
  reschedule(l);
}

void sim_data_fabric::schedule_link_rate(const std::string& a, const std::string& b, time_point at,
                                         double bps, bool both) {
  timer_->at(at, [w = weak_from_this(), a, b, bps, both] {
    auto self = w.lock();
    if (!self)
      return;
    self->set_link_rate(a, b, bps);
    if (both)
      self->set_link_rate(b, a, bps);
  });
}

void sim_data_fabric::set_loss(const std::string& from, const std::string& to, double p) {
  auto& l = link_between(from, to);
  advance(l);
  l.loss = std::clamp(p, 0.0, 0.99);
  reschedule(l);
}

data_plane_ptr sim_data_fabric::attach(data_plane_config cfg, metrics& m, logger_ptr log) {
  if (live_)
    return attach_live(std::move(cfg), m, std::move(log));
  auto name = cfg.node;
  auto p = std::make_shared<sim_data_plane>(shared_from_this(), std::move(cfg), std::move(log));
  planes_[name] = p.get();
  for (auto& [key, f] : flows_)
    if (f->dst == name)
      f->to = p.get();
  return p;
}

void sim_data_fabric::detach(sim_data_plane* p) {
  auto it = planes_.find(p->node());
  if (it != planes_.end() && it->second == p) {
    planes_.erase(it);
    for (auto& [key, f] : flows_)
      if (f->to == p)
        f->to = nullptr;
  }
  std::vector<std::shared_ptr<flow>> mine;
  for (auto& [key, f] : flows_)
    if (f->src == p->node())
      mine.push_back(f);
  for (auto& f : mine)
    fail(*f, "stopped");
  reachability_changed(); // transfers toward it stall from now on
}

sim_link_totals sim_data_fabric::totals(const std::string& from, const std::string& to) const {
  sim_link_totals t;
  auto it = links_.find({from, to});
  if (it == links_.end())
    return t;
  auto& l = *it->second;
  const double dt = seconds(timer_->now() - l.updated);
  t.bytes_delivered = l.delivered;
  t.capacity_bps = l.capacity_bps;
  t.messages = l.messages;
  for (auto& f : l.flows) {
    double sent = dt > 0 ? std::min(f->pushed, f->sent + f->rate * dt) : f->sent;
    t.bytes_delivered += sent - f->sent;
    t.backlog_bytes += f->pushed - sent;
    t.active += f->rate > 0 && f->pushed - sent > drained_eps ? 1 : 0;
    ++t.open;
  }
  return t;
}

std::vector<std::pair<std::string, std::string>> sim_data_fabric::links() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [key, _] : links_)
    out.push_back(key);
  return out;
}

void sim_data_fabric::fill_backlog(const std::string& node,
                                   std::vector<data_link_report>& out) const {
  for (auto& r : out) {
    auto* l = [&]() -> const link* {
      auto it = links_.find({cluster_of(node), cluster_of(r.peer)});
      return it == links_.end() ? nullptr : it->second.get();
    }();
    if (!l)
      continue;
    const double dt = seconds(timer_->now() - l->updated);
    for (auto& f : l->flows) {
      if (f->src != node || f->dst != r.peer)
        continue;
      double sent = dt > 0 ? std::min(f->pushed, f->sent + f->rate * dt) : f->sent;
      r.bytes_queued += static_cast<uint64_t>(f->pushed - sent);
      ++r.active_transfers;
    }
  }
}

void sim_data_fabric::open(sim_data_plane* src, uint64_t id, const std::string& peer,
                           const std::string& sink, std::string meta, data_plane::done_handler done,
                           duration timeout) {
  auto f = std::make_shared<flow>();
  f->src = src->node();
  f->dst = peer;
  f->sink = sink;
  f->meta = std::move(meta);
  f->id = id;
  f->done = std::move(done);
  f->stats.opened = timer_->now();
  f->out = &src->stats(peer); // the peer shows up in links() from its first transfer
  if (auto p = planes_.find(peer); p != planes_.end())
    f->to = p->second;
  auto [it, fresh] = flows_.emplace(std::pair{f->src, id}, f);
  if (!fresh) {
    transfer_outcome out{.id = id,
                         .ok = false,
                         .error =
                             "transfer id " + std::to_string(id) + " is already open on " + f->src};
    f->done(std::move(out));
    return;
  }
  if (!cluster_.count(peer) && !planes_.count(peer)) {
    flows_.erase(it);
    transfer_outcome out{.id = id, .ok = false, .error = "unknown peer " + peer};
    f->done(std::move(out));
    return;
  }
  auto& l = link_of(f->src, peer);
  advance(l);
  f->on = &l;
  l.flows.push_back(f);
  f->active = timer_->now();
  arm_timeout(f, timeout);
}

void sim_data_fabric::arm_timeout(const std::shared_ptr<flow>& f, duration timeout) {
  // Fails the flow once `timeout` passed since the producer's last step (a long prefill
  // keeps its transfer alive by pushing); re-armed while the producer keeps going.
  timer_->at(f->active + timeout, [w = weak_from_this(), wf = std::weak_ptr<flow>(f), timeout] {
    auto self = w.lock();
    auto fl = wf.lock();
    if (!self || !fl || fl->ended)
      return;
    if (self->timer_->now() < fl->active + timeout)
      return self->arm_timeout(fl, timeout);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    self->fail(*fl, "timed out after " + std::to_string(ms) + " ms (" +
                        std::to_string(static_cast<uint64_t>(fl->sent)) + " of " +
                        std::to_string(static_cast<uint64_t>(fl->pushed)) + " bytes through to " +
                        fl->dst + ")");
  });
}

void sim_data_fabric::push(const std::string& src, uint64_t id, bulk_ptr chunk) {
  auto it = flows_.find({src, id});
  if (it == flows_.end() || it->second->finished || !it->second->on)
    return;
  auto& f = *it->second;
  auto& l = *f.on;
  advance(l);
  f.active = timer_->now();
  const std::span<const std::byte> bytes{chunk->data(), chunk->size()};
  f.payload += bytes.size();
  f.pushed += wire_size_ ? wire_size_(bytes) : static_cast<double>(bytes.size());
  ++f.stats.chunks;
  ++l.messages;
  f.chunks.push_back(std::move(chunk));
  reschedule(l);
}

void sim_data_fabric::finish(const std::string& src, uint64_t id) {
  auto it = flows_.find({src, id});
  if (it == flows_.end() || it->second->finished || !it->second->on)
    return;
  auto f = it->second;
  auto& l = *f->on;
  advance(l);
  f->finished = true;
  f->stats.finished = timer_->now();
  f->active = f->stats.finished;
  if (f->pushed - f->sent <= drained_eps) {
    f->sent = f->pushed;
    complete(*f);
  }
  reschedule(l);
}

void sim_data_fabric::cancel(const std::string& src, uint64_t id, const std::string& why) {
  auto it = flows_.find({src, id});
  if (it != flows_.end())
    fail(*it->second, why);
}

void sim_data_fabric::advance(link& l) {
  const auto now = timer_->now();
  const double dt = seconds(now - l.updated);
  l.updated = now;
  if (dt <= 0)
    return;
  for (auto& f : l.flows) {
    if (f->rate <= 0)
      continue;
    const double moved = std::min(f->pushed - f->sent, f->rate * dt);
    f->sent += moved;
    l.delivered += moved;
    f->out->sent += moved;
    if (l.loss > 0) // re-sends of what the link lost: extra bytes, same goodput
      f->out->retransmitted += moved * l.loss / (1 - l.loss);
  }
}

void sim_data_fabric::reschedule(link& l) {
  ++l.gen;
  std::vector<flow*> active;
  for (auto& f : l.flows) {
    f->rate = 0;
    if (f->pushed - f->sent > drained_eps && f->to && net_->reachable(f->src, f->dst))
      active.push_back(f.get());
  }
  if (active.empty())
    return;
  const double cap = l.capacity_bps > 0 ? l.capacity_bps / 8 * (1 - l.loss)
                                        : std::numeric_limits<double>::infinity();
  // Max-min fairness with no constraint but the link itself: an equal split among
  // the transfers that have bytes waiting (a transfer waiting for its prefill's next
  // layer takes nothing and leaves its share to the others).
  const double share = l.shared ? cap / static_cast<double>(active.size()) : cap;
  double next_s = std::numeric_limits<double>::infinity();
  // A drain matters when it ends a transfer or frees a share for another; a transfer
  // alone on its link that only waits for its prefill's next layer drains unobserved
  // (advance() caps what moves at what was pushed; backlog and totals extrapolate).
  // Waking for those was one timer event per KV chunk of every request.
  bool observed = l.shared && active.size() > 1;
  for (auto* f : active) {
    f->rate = share;
    next_s = std::min(next_s, (f->pushed - f->sent) / share);
    observed = observed || f->finished;
  }
  if (!observed)
    return; // (gen moved on above: what was planned before is void)
  auto delay = std::chrono::nanoseconds(
      std::isfinite(next_s) ? static_cast<int64_t>(std::ceil(next_s * 1e9)) : 0);
  timer_->after(delay, [w = weak_from_this(), lp = &l, gen = l.gen] {
    if (auto self = w.lock())
      self->on_drain(*lp, gen);
  });
}

void sim_data_fabric::on_drain(link& l, uint64_t gen) {
  if (gen != l.gen)
    return; // re-planned since
  const bool infinite = !(l.capacity_bps > 0);
  advance(l);
  std::vector<std::shared_ptr<flow>> done;
  for (auto& f : l.flows) {
    if (f->rate <= 0)
      continue;
    if (infinite || f->pushed - f->sent <= std::max(drained_eps, f->rate * 2e-9)) {
      l.delivered += f->pushed - f->sent;
      f->sent = f->pushed;
      if (f->finished)
        done.push_back(f);
    }
  }
  for (auto& f : done)
    complete(*f);
  reschedule(l);
}

void sim_data_fabric::complete(flow& fr) {
  auto f = flows_.at({fr.src, fr.id});
  if (f->on) {
    std::erase(f->on->flows, f);
    f->on = nullptr;
  }
  // Delivery after one latency, the acknowledgement after another. A receiver that is
  // gone or cut off never answers: the sender's timeout fails the transfer.
  timer_->after(net_->latency(f->src, f->dst), [w = weak_from_this(), f] {
    auto self = w.lock();
    if (!self || f->ended)
      return;
    auto p = self->planes_.find(f->dst);
    if (p == self->planes_.end() || !self->net_->reachable(f->src, f->dst))
      return;
    received_transfer rt;
    rt.id = f->id;
    rt.source = f->src;
    rt.sink = f->sink;
    rt.meta = f->meta;
    rt.chunks = f->chunks;
    rt.stats = f->stats;
    rt.stats.bytes = f->payload;
    rt.stats.completed = self->timer_->now();
    const bool taken = p->second->deliver(f->sink, std::move(rt));
    self->timer_->after(self->net_->latency(f->dst, f->src), [w, f, taken] {
      auto self = w.lock();
      if (!self || f->ended || !self->net_->reachable(f->dst, f->src))
        return;
      if (!taken)
        return self->fail(*f, "refused by " + f->dst + ": no sink \"" + f->sink + "\"");
      f->ended = true;
      self->flows_.erase({f->src, f->id});
      transfer_outcome out;
      out.id = f->id;
      out.ok = true;
      out.stats = f->stats;
      out.stats.bytes = f->payload;
      out.stats.completed = self->timer_->now();
      if (auto s = self->planes_.find(f->src); s != self->planes_.end())
        s->second->stats(f->dst).acked += f->pushed;
      f->done(std::move(out));
    });
  });
}

void sim_data_fabric::fail(flow& fr, const std::string& why) {
  if (fr.ended)
    return;
  auto f = flows_.at({fr.src, fr.id});
  f->ended = true;
  if (f->on) {
    auto& l = *f->on;
    advance(l);
    std::erase(l.flows, f);
    f->on = nullptr;
    reschedule(l);
  }
  flows_.erase({f->src, f->id});
  transfer_outcome out;
  out.id = f->id;
  out.ok = false;
  out.error = why;
  out.stats = f->stats;
  out.stats.bytes = f->payload;
  out.stats.completed = timer_->now();
  f->done(std::move(out));
}

void sim_data_fabric::reachability_changed() {
  for (auto& [_, l] : links_) {
    advance(*l);
    reschedule(*l);
  }
}

sim_data_fabric* sim_fabric_of(data_plane* dp) {
  auto* p = dynamic_cast<sim_data_plane*>(dp);
  return p ? &p->fabric() : live_fabric_of(dp);
}

std::shared_ptr<sim_data_fabric> sim_network::data_fabric() {
  if (!fabric_) {
    fabric_ = std::make_shared<sim_data_fabric>(sys_, this);
    fabric_->start_listening();
  }
  return fabric_;
}

} // namespace prfaas

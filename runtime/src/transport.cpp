#include "prfaas/runtime/transport.hpp"

#include <algorithm>
#include <unordered_map>

#include <caf/all.hpp>

#include "prfaas/runtime/dedup_cache.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/failure_detector.hpp"

namespace prfaas {

namespace {

using clock_type = std::chrono::steady_clock;

struct pending_request {
  caf::typed_response_promise<remote_message> rp;
  wire::Envelope env;
  bulk_ptr bulk;
  std::string peer;
  clock_type::time_point deadline;
};

struct transport_state {
  static inline const char* name = "transport";

  std::shared_ptr<messenger> m;
  std::unique_ptr<failure_detector> fd;
  std::unique_ptr<dedup_cache> dedup;
  uint64_t next_id = 1;
  uint64_t heartbeat_seq = 0;
  std::unordered_map<uint64_t, pending_request> pending;
  std::vector<caf::actor> subscribers;

  transport_metrics& counters() { return m->counters(); }
  const transport_config& cfg() const { return m->config(); }
};

using self_ptr = transport_actor::stateful_pointer<transport_state>;

clock_type::time_point now_of(self_ptr self) {
  return self->clock().now();
}

void fail_pending(self_ptr self, uint64_t id, caf::error err) {
  auto& st = self->state;
  auto i = st.pending.find(id);
  if (i == st.pending.end())
    return;
  i->second.rp.deliver(std::move(err));
  st.pending.erase(i);
  st.counters().pending_requests.Set(static_cast<double>(st.pending.size()));
}

void publish(self_ptr self, const std::vector<membership_event>& events) {
  auto& st = self->state;
  for (auto& ev : events) {
    if (ev.state == peer_state::down)
      st.m->log()->warn("peer_down peer={} incarnation={} silent_ms={}", ev.peer, ev.incarnation,
                        ev.silent_ns / 1000000);
    else
      st.m->log()->info("peer_{} peer={} incarnation={}", to_string(ev.state), ev.peer,
                        ev.incarnation);
    if (ev.state == peer_state::down) {
      // Requests to a dead peer end now rather than at their deadline.
      std::vector<uint64_t> doomed;
      for (auto& [id, p] : st.pending)
        if (p.peer == ev.peer)
          doomed.push_back(id);
      for (auto id : doomed)
        fail_pending(self, id,
                     make_error(errc::peer_down, ev.peer + " (incarnation "
                                                   + std::to_string(ev.incarnation)
                                                   + ") stopped answering"));
    }
    for (auto& s : st.subscribers)
      caf::anon_send(s, ev);
  }
  st.counters().peers_up.Set(static_cast<double>(st.fd->up_count()));
}

void schedule_retry(self_ptr self, uint64_t id, clock_type::time_point deadline) {
  auto left = deadline - now_of(self);
  auto wait = std::min<clock_type::duration>(self->state.cfg().retry_interval, left);
  if (wait < clock_type::duration::zero())
    wait = clock_type::duration::zero();
  self->delayed_send(self, wait, retry_atom_v, id);
}

void reply_to_request(self_ptr self, const dedup_cache::key& key, wire::Envelope answer,
                      bulk_ptr bulk) {
  auto& st = self->state;
  auto header = st.m->serialize(answer, bulk);
  st.dedup->complete(key, {key.node, header, bulk});
  st.m->send_serialized(key.node, std::move(header), std::move(bulk));
}

wire::Envelope answer_envelope(const wire::Envelope& req) {
  wire::Envelope a;
  *a.mutable_source() = req.destination();
  *a.mutable_destination() = req.source();
  a.set_destination_incarnation(req.source_incarnation());
  a.set_correlation_id(req.request_id());
  return a;
}

void handle_request(self_ptr self, inbound_ptr in) {
  auto& st = self->state;
  auto& env = in->env;
  dedup_cache::key key{env.source().node(), env.source_incarnation(), env.request_id()};
  const dedup_cache::answer* cached = nullptr;
  switch (st.dedup->check(key, now_of(self), &cached)) {
    case dedup_cache::verdict::in_progress:
      st.counters().drop(drop_reason::duplicate);
      return;
    case dedup_cache::verdict::answered:
      st.counters().drop(drop_reason::duplicate);
      st.m->send_serialized(cached->peer, cached->header, cached->bulk);
      return;
    case dedup_cache::verdict::fresh:
      break;
  }
  auto dest = st.m->lookup(env.destination().actor());
  if (!dest) {
    auto a = answer_envelope(env);
    a.set_kind(wire::ERROR);
    a.set_error_code(static_cast<uint32_t>(errc::unknown_actor));
    a.set_error_text("no actor " + env.destination().actor() + " on " + st.m->node());
    reply_to_request(self, key, std::move(a), nullptr);
    return;
  }
  auto budget = env.deadline_budget_ns() > 0
                  ? std::chrono::nanoseconds(env.deadline_budget_ns())
                  : std::chrono::duration_cast<std::chrono::nanoseconds>(st.cfg().request_timeout);
  remote_message msg;
  msg.source = {env.source().node(), env.source().actor()};
  msg.destination = {env.destination().node(), env.destination().actor()};
  msg.type = env.type();
  msg.payload = env.payload();
  msg.bulk = in->bulk;
  msg.request_id = env.request_id();
  msg.deadline = now_of(self) + budget;
  auto req = std::make_shared<wire::Envelope>(answer_envelope(env));
  self->request(dest, budget, std::move(msg))
    .then(
      [self, key, req](remote_message& r) {
        req->set_kind(wire::RESPONSE);
        req->set_type(std::move(r.type));
        req->set_payload(std::move(r.payload));
        reply_to_request(self, key, std::move(*req), std::move(r.bulk));
      },
      [self, key, req](caf::error& e) {
        req->set_kind(wire::ERROR);
        req->set_error_code(static_cast<uint32_t>(error_code(e)));
        req->set_error_text(describe(e));
        reply_to_request(self, key, std::move(*req), nullptr);
      });
}

void handle_response(self_ptr self, inbound_ptr in) {
  auto& st = self->state;
  auto& env = in->env;
  auto i = st.pending.find(env.correlation_id());
  if (i == st.pending.end() || i->second.peer != env.source().node()) {
    st.counters().drop(drop_reason::late);
    return;
  }
  if (env.kind() == wire::ERROR) {
    auto code = static_cast<errc>(env.error_code());
    fail_pending(self, env.correlation_id(),
                 make_error(code == errc::none ? errc::remote_error : code, env.error_text()));
    return;
  }
  remote_message r;
  r.source = {env.source().node(), env.source().actor()};
  r.destination = {env.destination().node(), env.destination().actor()};
  r.type = std::move(*env.mutable_type());
  r.payload = std::move(*env.mutable_payload());
  r.bulk = std::move(in->bulk);
  i->second.rp.deliver(std::move(r));
  st.pending.erase(i);
  st.counters().pending_requests.Set(static_cast<double>(st.pending.size()));
}

caf::result<remote_message> start_request(self_ptr self, remote_message& msg,
                                          caf::timespan timeout) {
  auto& st = self->state;
  if (msg.destination.node == st.m->node()) {
    auto dest = st.m->lookup(msg.destination.actor);
    if (!dest)
      return make_error(errc::unknown_actor,
                        "no actor " + msg.destination.actor + " on " + st.m->node());
    auto rp = self->make_response_promise<remote_message>();
    msg.deadline = now_of(self) + timeout;
    self->request(dest, timeout, std::move(msg))
      .then([rp](remote_message& r) mutable { rp.deliver(std::move(r)); },
            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
    return rp;
  }
  const auto& peer = msg.destination.node;
  if (st.m->peers().count(peer) == 0)
    return make_error(errc::unreachable, "node " + peer + " is not part of the deployment");
  auto known = st.fd->incarnation(peer);
  if (known != 0 && st.fd->state(peer) == peer_state::down)
    return make_error(errc::peer_down, peer + " is down");
  auto id = st.next_id++;
  auto deadline = now_of(self) + timeout;
  wire::Envelope env;
  env.set_kind(wire::REQUEST);
  env.mutable_source()->set_node(msg.source.node.empty() ? st.m->node() : msg.source.node);
  env.mutable_source()->set_actor(msg.source.actor.empty() ? "transport" : msg.source.actor);
  env.mutable_destination()->set_node(peer);
  env.mutable_destination()->set_actor(msg.destination.actor);
  // Pin the incarnation we know: a restarted peer drops retries meant for its
  // predecessor instead of running them a second time.
  env.set_destination_incarnation(known);
  env.set_request_id(id);
  env.set_type(msg.type);
  env.set_payload(msg.payload);
  env.set_deadline_budget_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count());
  auto rp = self->make_response_promise<remote_message>();
  st.counters().requests.Increment();
  auto status = st.m->send_envelope(peer, env, msg.bulk);
  if (status == send_status::unknown_peer || status == send_status::stopped)
    return make_error(errc::unreachable, "cannot send to " + peer);
  st.pending.emplace(id, pending_request{rp, std::move(env), std::move(msg.bulk), peer, deadline});
  st.counters().pending_requests.Set(static_cast<double>(st.pending.size()));
  schedule_retry(self, id, deadline);
  return rp;
}

void on_retry(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto i = st.pending.find(id);
  if (i == st.pending.end())
    return;
  auto& p = i->second;
  auto now = now_of(self);
  if (now >= p.deadline) {
    st.counters().timeouts.Increment();
    fail_pending(self, id,
                 make_error(errc::request_timeout,
                            "no answer from " + p.peer + "/" + p.env.destination().actor()
                              + " after " + std::to_string(p.env.attempt() + 1) + " attempts"));
    return;
  }
  p.env.set_attempt(p.env.attempt() + 1);
  p.env.set_deadline_budget_ns(
    std::chrono::duration_cast<std::chrono::nanoseconds>(p.deadline - now).count());
  st.counters().retries.Increment();
  st.m->send_envelope(p.peer, p.env, p.bulk);
  schedule_retry(self, id, p.deadline);
}

void on_heartbeat(self_ptr self) {
  auto& st = self->state;
  wire::Heartbeat hb;
  hb.set_sequence(++st.heartbeat_seq);
  auto payload = hb.SerializeAsString();
  for (auto& peer : st.m->peers()) {
    wire::Envelope env;
    env.set_kind(wire::HEARTBEAT);
    env.mutable_destination()->set_node(peer);
    env.set_type("prfaas.wire.Heartbeat");
    env.set_payload(payload);
    if (st.m->send_envelope(peer, env, nullptr) == send_status::queued)
      st.counters().heartbeats_sent.Increment();
  }
  publish(self, st.fd->tick(now_of(self)));
  self->delayed_send(self, st.fd->config().interval, heartbeat_atom_v);
}

transport_actor::behavior_type transport_impl(self_ptr self, std::shared_ptr<messenger> m,
                                              failure_detector_config fd_cfg) {
  auto& st = self->state;
  st.m = std::move(m);
  st.fd = std::make_unique<failure_detector>(fd_cfg);
  st.dedup = std::make_unique<dedup_cache>(st.cfg().dedup_window, st.cfg().dedup_capacity);
  for (auto& p : st.m->peers())
    st.fd->add_peer(p);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const caf::actor& a) { return a.address() == dm.source; }),
               subs.end());
  });
  self->set_exit_handler([self](caf::exit_msg& em) {
    std::vector<uint64_t> ids;
    for (auto& [id, _] : self->state.pending)
      ids.push_back(id);
    for (auto id : ids)
      fail_pending(self, id, make_error(errc::shutting_down, self->state.m->node() + " is stopping"));
    self->quit(em.reason);
  });
  self->send(self, heartbeat_atom_v);
  return {
    [self](send_atom, remote_message& msg) { self->state.m->send_oneway(msg); },
    [self](request_atom, remote_message& msg, caf::timespan timeout) {
      return start_request(self, msg, timeout);
    },
    [self](caf::subscribe_atom, caf::actor who) {
      self->monitor(who);
      self->state.subscribers.push_back(who);
      // Start the subscriber in sync with the current view.
      for (auto& p : self->state.m->peers())
        if (self->state.fd->state(p) != peer_state::down)
          caf::anon_send(who, membership_event{p, self->state.fd->incarnation(p),
                                           self->state.fd->state(p), 0});
    },
    [self](peers_atom) {
      std::vector<peer_view> out;
      for (auto& p : self->state.m->peers())
        out.push_back({p, self->state.fd->incarnation(p), self->state.fd->state(p)});
      return out;
    },
    [self](inbound_atom, inbound_ptr& in) {
      auto& env = in->env;
      publish(self, self->state.fd->heard(env.source().node(), env.source_incarnation(),
                                          now_of(self)));
      switch (env.kind()) {
        case wire::REQUEST: handle_request(self, std::move(in)); break;
        case wire::RESPONSE:
        case wire::ERROR: handle_response(self, std::move(in)); break;
        default: break; // HEARTBEAT: liveness only
      }
    },
    [self](heartbeat_atom) { on_heartbeat(self); },
    [self](retry_atom, uint64_t id) { on_retry(self, id); },
  };
}

} // namespace

transport_actor spawn_transport(caf::actor_system& sys, std::shared_ptr<messenger> m,
                                failure_detector_config fd) {
  return sys.spawn(transport_impl, std::move(m), fd);
}

} // namespace prfaas

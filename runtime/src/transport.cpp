#include "prfaas/runtime/transport.hpp"

#include <algorithm>
#include <map>

#include <caf/all.hpp>

#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/failure_detector.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas {

namespace {

using clock_type = std::chrono::steady_clock;

struct transport_state {
  static inline const char* name = "transport";

  std::shared_ptr<messenger> m;
  std::unique_ptr<failure_detector> fd;
  uint64_t heartbeat_seq = 0;
  std::vector<caf::actor> subscribers;
  std::vector<caf::actor> fence_subscribers; ///< of fenced_event
  std::map<std::string, uint64_t> seen_up;   ///< peer → incarnation last seen up

  transport_metrics& counters() { return m->counters(); }
};

using self_ptr = transport_actor::stateful_pointer<transport_state>;

void publish(self_ptr self, const std::vector<membership_event>& events) {
  // Every heartbeat heard comes through here; the up count only moves with an event
  // (peers start down), and counting it per heartbeat made a 97-node simulation spend
  // 8% of its time walking peer maps.
  if (events.empty())
    return;
  auto& st = self->state;
  for (auto& ev : events) {
    if (ev.state == peer_state::down) {
      st.m->log()->warn("peer_down peer={} incarnation={} silent_ms={}", ev.peer, ev.incarnation,
                        ev.silent_ns / 1000000);
      probe_hit(st.m->node_metrics(), "membership.peer_down");
    } else {
      st.m->log()->info("peer_{} peer={} incarnation={}", to_string(ev.state), ev.peer,
                        ev.incarnation);
    }
    // Fencing: a peer declared down may be alive (paused, cut off); its frames wait for
    // its acknowledgement, which the failure detector requires before it is up again.
    if (ev.state == peer_state::down)
      st.m->epochs()->fence(ev.peer, ev.incarnation);
    else
      st.m->epochs()->lift(ev.peer, ev.incarnation);
    if (ev.state == peer_state::up) {
      auto [it, first] = st.seen_up.emplace(ev.peer, ev.incarnation);
      if (!first && it->second != ev.incarnation)
        probe_hit(st.m->node_metrics(), "membership.peer_restarted");
      it->second = ev.incarnation;
    }
    st.m->peer_changed(ev);
    for (auto& s : st.subscribers)
      caf::anon_send(s, ev);
  }
  st.counters().peers_up.Set(static_cast<double>(st.fd->up_count()));
}

/// `peer` said it declared this node down: drop what was shared with it (see
/// peer_epochs.hpp). The next heartbeat to it acknowledges.
void on_fenced(self_ptr self, const std::string& peer, uint64_t peer_incarnation, uint64_t count) {
  auto& st = self->state;
  st.m->log()->warn("fenced_by peer={} incarnation={} count={}: it declared this node down (paused "
                    "or cut off); the work held for it is stale and is dropped",
                    peer, st.m->incarnation(), count);
  probe_hit(st.m->node_metrics(), "membership.fenced");
  st.m->node_metrics()
      .counter("prfaas_transport_fenced_total",
               "times a peer said it had declared this node down (this node then dropped the "
               "work it held for that peer)")
      .Increment();
  // Its requests to the peer, and what waits for it in the backlog, are from before.
  st.m->peer_changed({peer, peer_incarnation, peer_state::down, 0});
  if (st.fd->state(peer) != peer_state::down)
    st.m->peer_changed({peer, peer_incarnation, st.fd->state(peer), 0});
  for (auto& s : st.fence_subscribers)
    caf::anon_send(s, fenced_event{peer, st.m->incarnation(), count});
}

void on_heard(self_ptr self, const wire::Envelope& env) {
  auto& st = self->state;
  const auto& peer = env.source().node();
  wire::Heartbeat hb;
  if (env.kind() != wire::HEARTBEAT || !hb.ParseFromString(env.payload()))
    hb.Clear(); // nothing to acknowledge or to learn
  publish(self, st.fd->heard(peer, env.source_incarnation(), self->clock().now(),
                             env.kind() == wire::HEARTBEAT ? hb.fence_ack() : UINT64_MAX));
  if (hb.down_count() > 0 && hb.down_incarnation() == st.m->incarnation() &&
      st.m->epochs()->notice(peer, hb.down_count()))
    on_fenced(self, peer, env.source_incarnation(), hb.down_count());
}

void on_heartbeat(self_ptr self) {
  auto& st = self->state;
  ++st.heartbeat_seq;
  for (auto& peer : st.m->peers()) {
    wire::Heartbeat hb;
    hb.set_sequence(st.heartbeat_seq);
    if (auto n = st.fd->downs(peer); n > 0) {
      hb.set_down_incarnation(st.fd->incarnation(peer));
      hb.set_down_count(n);
    }
    hb.set_fence_ack(st.m->epochs()->notices(peer));
    wire::Envelope env;
    env.set_kind(wire::HEARTBEAT);
    env.mutable_destination()->set_node(peer);
    env.set_type("prfaas.wire.Heartbeat");
    env.set_payload(hb.SerializeAsString());
    if (st.m->send_envelope(peer, env, nullptr) == send_status::queued)
      st.counters().heartbeats_sent.Increment();
  }
  publish(self, st.fd->tick(self->clock().now()));
  st.m->expire_inbound();
  self->delayed_send(self, st.fd->config().interval, heartbeat_atom_v);
}

transport_actor::behavior_type transport_impl(self_ptr self, std::shared_ptr<messenger> m,
                                              failure_detector_config fd_cfg) {
  auto& st = self->state;
  st.m = std::move(m);
  st.fd = std::make_unique<failure_detector>(fd_cfg);
  for (auto& p : st.m->peers())
    st.fd->add_peer(p);
  self->set_down_handler([self](caf::down_msg& dm) {
    for (auto* subs : {&self->state.subscribers, &self->state.fence_subscribers})
      subs->erase(std::remove_if(subs->begin(), subs->end(),
                                 [&](const caf::actor& a) { return a.address() == dm.source; }),
                  subs->end());
  });
  // Request deadlines are this actor's timers: if it ends, for whatever reason,
  // nothing would end the outstanding requests any more.
  self->attach_functor([m = std::weak_ptr<messenger>(st.m)](const caf::error& reason) {
    if (auto locked = m.lock())
      locked->timers_lost(reason);
  });
  self->send(self, heartbeat_atom_v);
  return {
      [self](send_atom, remote_message& msg) { self->state.m->send_oneway(msg); },
      [self](caf::subscribe_atom, caf::actor who) {
        self->monitor(who);
        self->state.subscribers.push_back(who);
        // Start the subscriber in sync with the current view.
        for (auto& p : self->state.m->peers())
          if (self->state.fd->state(p) != peer_state::down)
            caf::anon_send(who, membership_event{p, self->state.fd->incarnation(p),
                                                 self->state.fd->state(p), 0});
      },
      [self](fence_atom, caf::actor who) {
        self->monitor(who);
        self->state.fence_subscribers.push_back(who);
      },
      [self](peers_atom) {
        std::vector<peer_view> out;
        for (auto& p : self->state.m->peers())
          out.push_back({p, self->state.fd->incarnation(p), self->state.fd->state(p)});
        return out;
      },
      [self](inbound_atom, inbound_ptr& in) { on_heard(self, in->env); },
      [self](heartbeat_atom) { on_heartbeat(self); },
      [self](retry_atom, uint64_t generation) {
        if (auto next = self->state.m->sweep(generation))
          self->delayed_send(self, next->first, retry_atom_v, next->second);
      },
  };
}

} // namespace

transport_actor spawn_transport(caf::actor_system& sys, std::shared_ptr<messenger> m,
                                failure_detector_config fd) {
  return sys.spawn(transport_impl, std::move(m), fd);
}

} // namespace prfaas

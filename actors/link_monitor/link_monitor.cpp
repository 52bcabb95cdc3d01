// `link_monitor`: one end of a cross-cluster link (docs/architecture.md). Measures the
// link toward `peer_cluster` and publishes link.LinkState to its subscribers.
//
//  * RTT and liveness: every `probe_interval`, a link.LinkProbe request to each
//    link_monitor on the peer cluster's nodes (from the deployment), bounded by
//    `probe_timeout`; an answer is an RTT sample, a failure a lost probe;
//  * throughput, backlog and re-sends: from the node's data plane, summed over the
//    peer cluster's nodes, each probe tick. A node without a data plane (simulation)
//    judges the link on RTT and liveness alone;
//  * capacity: `capacity`, else the deployment's `links[].rate` for the pair;
//  * state: a link_tracker (classify() + link_state_machine) with the thresholds and
//    dwell times of the parameters, so that it never flaps;
//  * publishing: one-way to every subscriber (link.Subscribe, or the `subscribers`
//    parameter) on each state change and every `publish_interval`.
// The state is this actor's own: a restart starts from `unknown`.
// Exposes prfaas_link_{state,rtt_seconds,min_rtt_seconds,throughput_bps,utilisation,
// backlog_bytes,probe_loss} gauges and prfaas_link_{probes,state_changes}_total.

#include <set>
#include <sstream>

#include <caf/all.hpp>

#include "link_monitor/link_tracker.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/messages/link_monitor.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/runtime/settings_schema.hpp"
#include "prfaas/wire/link.pb.h"

namespace prfaas::link {

namespace {

constexpr size_t max_subscribers = 256;

/// Every default is a member initialiser (the thresholds' too), rendered into the
/// parameter specs by monitor_schema().
struct monitor_settings {
  std::string cluster, peer_cluster;
  duration probe_interval = std::chrono::milliseconds(200);
  duration probe_timeout = std::chrono::milliseconds(500);
  duration publish_interval = std::chrono::seconds(1);
  size_t probe_window = 10;
  thresholds limits;
  double capacity_bps = 0;
};

struct link_metrics {
  link_metrics(metrics& m, const prometheus::Labels& l)
      : state(m.gauge("prfaas_link_state", "Link state: 0 unknown, 1 up, 2 degraded, 3 down", l)),
        rtt(m.gauge("prfaas_link_rtt_seconds", "Smoothed probe round-trip time", l)),
        min_rtt(
            m.gauge("prfaas_link_min_rtt_seconds", "Windowed minimum probe round-trip time", l)),
        throughput(m.gauge("prfaas_link_throughput_bps",
                           "Acknowledged data-plane bits/s to the peer cluster", l)),
        utilisation(m.gauge("prfaas_link_utilisation", "Throughput / configured link rate", l)),
        backlog(m.gauge("prfaas_link_backlog_bytes",
                        "Data-plane bytes queued or in flight to the peer cluster", l)),
        loss(m.gauge("prfaas_link_probe_loss", "Fraction of recent probes unanswered", l)),
        answered(m.counter("prfaas_link_probes_total", "Link probes, by outcome",
                           with(l, "outcome", "answered"))),
        lost(m.counter("prfaas_link_probes_total", "Link probes, by outcome",
                       with(l, "outcome", "lost"))),
        changes(m.counter("prfaas_link_state_changes_total", "Link state transitions", l)) {}

  static prometheus::Labels with(prometheus::Labels l, const std::string& k, const std::string& v) {
    l[k] = v;
    return l;
  }

  prometheus::Gauge &state, &rtt, &min_rtt, &throughput, &utilisation, &backlog, &loss;
  prometheus::Counter &answered, &lost, &changes;
};

struct monitor_state {
  static inline const char* name = "link_monitor";
  monitor_settings cfg;
  std::vector<address> peers;       ///< link monitors on the peer cluster
  std::set<std::string> peer_nodes; ///< nodes of the peer cluster (data-plane peers)
  std::vector<address> subscribers;
  std::unique_ptr<link_tracker> link;
  std::unique_ptr<link_metrics> stats;
  uint64_t probe_seq = 0;
  uint64_t publish_seq = 0;
};

using self_ptr = caf::stateful_actor<monitor_state>*;

std::vector<address> split_addresses(const std::string& list, const std::string& path) {
  std::vector<address> out;
  std::stringstream in{list};
  std::string item;
  while (std::getline(in, item, ',')) {
    auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b == std::string::npos)
      continue;
    address a;
    if (!address::parse(item.substr(b, e - b + 1), a))
      throw config_error(path, "\"" + item + "\" is not a node/actor address");
    out.push_back(std::move(a));
  }
  return out;
}

double secs(duration d) {
  return std::chrono::duration<double>(d).count();
}

LinkState current(self_ptr self, const address& me) {
  auto& s = self->state;
  auto& l = *s.link;
  LinkState out;
  out.set_cluster(s.cfg.cluster);
  out.set_peer_cluster(s.cfg.peer_cluster);
  out.set_state(static_cast<Condition>(l.state()));
  if (!l.rtt().empty()) {
    out.set_rtt_ms(secs(l.rtt().smoothed()) * 1e3);
    out.set_min_rtt_ms(secs(l.rtt().min()) * 1e3);
  }
  out.set_throughput_bps(l.throughput().throughput_bps());
  out.set_capacity_bps(l.capacity_bps());
  out.set_utilisation(l.utilisation());
  out.set_backlog_bytes(l.throughput().backlog_bytes());
  out.set_retransmits(l.throughput().retransmits());
  out.set_retransmit_rate(l.throughput().retransmit_rate());
  out.set_probe_loss(l.probes().loss());
  out.set_since_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - l.since())
          .count()));
  out.set_reason(l.reason());
  out.set_sequence(++s.publish_seq);
  out.set_monitor_node(me.node);
  out.set_monitor_actor(me.actor);
  return out;
}

void publish(self_ptr self, node_context* ctx, const address& me) {
  auto& subs = self->state.subscribers;
  if (subs.empty())
    return;
  auto st = current(self, me);
  for (auto& to : subs)
    remote_ref<link_subscriber_role>(ctx->msgr(), me, to).send(st);
}

void update_gauges(self_ptr self) {
  auto& l = *self->state.link;
  auto& g = *self->state.stats;
  g.state.Set(static_cast<double>(l.state()));
  if (!l.rtt().empty()) {
    g.rtt.Set(secs(l.rtt().smoothed()));
    g.min_rtt.Set(secs(l.rtt().min()));
  }
  g.throughput.Set(l.throughput().throughput_bps());
  g.utilisation.Set(l.utilisation());
  g.backlog.Set(static_cast<double>(l.throughput().backlog_bytes()));
  g.loss.Set(l.probes().loss());
}

/// Judges the link now; logs and publishes a change.
void evaluate(self_ptr self, node_context* ctx, const address& me) {
  auto& s = self->state;
  auto& l = *s.link;
  const auto before = l.state();
  if (l.evaluate(self->clock().now())) {
    s.stats->changes.Increment();
    ctx->log()->warn("link_state cluster={} peer_cluster={} from={} to={} reason={} rtt_ms={:.2f} "
                     "probe_loss={:.2f}",
                     s.cfg.cluster, s.cfg.peer_cluster, to_string(before), to_string(l.state()),
                     l.reason(), l.rtt().empty() ? 0.0 : secs(l.rtt().smoothed()) * 1e3,
                     l.probes().loss());
    publish(self, ctx, me);
  }
  update_gauges(self);
}

/// Data-plane counters toward the peer cluster's nodes.
void sample_data_plane(self_ptr self, node_context* ctx) {
  auto* dp = ctx->data();
  if (!dp)
    return;
  link_counters c;
  for (auto& r : dp->links()) {
    if (!self->state.peer_nodes.count(r.peer))
      continue;
    c.bytes_acked += r.bytes_acked;
    c.retransmits += r.retransmits;
    c.backlog_bytes += r.bytes_queued + r.bytes_in_flight;
  }
  self->state.link->traffic(c, self->clock().now());
}

void probe(self_ptr self, node_context* ctx, const address& me) {
  auto& s = self->state;
  for (auto& peer : s.peers) {
    LinkProbe p;
    p.set_sequence(++s.probe_seq);
    p.set_from_cluster(s.cfg.cluster);
    const auto sent = self->clock().now();
    remote_ref<link_monitor_role>(ctx->msgr(), me, peer)
        .request(self, p, s.cfg.probe_timeout)
        .then(
            [self, ctx, me, sent](LinkProbeReply&) {
              auto& s = self->state;
              const auto now = self->clock().now();
              s.link->answered(now - sent, now);
              s.stats->answered.Increment();
              evaluate(self, ctx, me);
            },
            [self, ctx, me](caf::error&) {
              self->state.link->lost();
              self->state.stats->lost.Increment();
              evaluate(self, ctx, me);
            });
  }
}

caf::behavior link_monitor(self_ptr self, node_context* ctx, std::string name, monitor_settings cfg,
                           std::vector<address> subscribers) {
  auto& s = self->state;
  const auto me = ctx->local(name);
  s.cfg = std::move(cfg);
  s.subscribers = std::move(subscribers);
  s.link = std::make_unique<link_tracker>(s.cfg.limits, s.cfg.probe_window, s.cfg.capacity_bps,
                                          self->clock().now());
  s.stats = std::make_unique<link_metrics>(
      ctx->node_metrics(),
      prometheus::Labels{{"cluster", s.cfg.cluster}, {"peer_cluster", s.cfg.peer_cluster}});
  for (auto& n : ctx->deployment().nodes) {
    if (n.cluster != s.cfg.peer_cluster)
      continue;
    s.peer_nodes.insert(n.name);
    for (auto& a : n.actors)
      if (a.type == "link_monitor")
        s.peers.push_back({n.name, a.name});
  }
  if (s.cfg.cluster == s.cfg.peer_cluster)
    ctx->log()->warn("link_monitor_same_cluster name={} cluster={}", name, s.cfg.cluster);
  update_gauges(self);
  ctx->log()->info(
      "link_monitor_started name={} cluster={} peer_cluster={} peers={} capacity_bps={} "
      "data_plane={}",
      name, s.cfg.cluster, s.cfg.peer_cluster, s.peers.size(), s.cfg.capacity_bps,
      ctx->data() ? "yes" : "no");
  self->send(self, caf::tick_atom_v);
  self->delayed_send(self, s.cfg.publish_interval, caf::publish_atom_v);

  return {
      [=](caf::tick_atom) {
        sample_data_plane(self, ctx);
        probe(self, ctx, me);
        evaluate(self, ctx, me); // notices silence even while probes are still out
        self->delayed_send(self, self->state.cfg.probe_interval, caf::tick_atom_v);
      },
      [=](caf::publish_atom) {
        publish(self, ctx, me);
        self->delayed_send(self, self->state.cfg.publish_interval, caf::publish_atom_v);
      },
      [=](remote_message& msg) -> caf::result<remote_message> {
        auto& s = self->state;
        return dispatch<link_monitor_role>(
            *ctx, msg,
            [&](LinkProbe& p) {
              LinkProbeReply r;
              r.set_sequence(p.sequence());
              r.set_cluster(s.cfg.cluster);
              r.set_state(static_cast<Condition>(s.link->state()));
              return r;
            },
            [&](Subscribe& sub) -> answer<LinkState> {
              address who{sub.node().empty() ? msg.source.node : sub.node(),
                          sub.actor().empty() ? msg.source.actor : sub.actor()};
              auto& subs = s.subscribers;
              auto it = std::find(subs.begin(), subs.end(), who);
              if (sub.unsubscribe()) {
                if (it != subs.end())
                  subs.erase(it);
              } else if (it == subs.end()) {
                if (subs.size() >= max_subscribers)
                  return make_error(errc::overloaded,
                                    "link monitor " + name + ": subscriber limit (" +
                                        std::to_string(max_subscribers) + ") reached");
                subs.push_back(who);
              }
              return current(self, me);
            });
      },
  };
}

using S = monitor_settings;

const settings_schema<S>& monitor_schema() {
  static const auto schema =
      settings_schema<S>{}
          .required("peer_cluster", param_kind::string, &S::peer_cluster,
                    "the cluster at the other end of the link")
          .param("probe_interval", param_kind::duration, &S::probe_interval,
                 "how often the peer's monitors are probed")
          .param("probe_timeout", param_kind::duration, &S::probe_timeout,
                 "a probe unanswered this long is lost")
          .param("publish_interval", param_kind::duration, &S::publish_interval,
                 "LinkState to subscribers at least this often")
          .param("probe_window", param_kind::integer, &S::probe_window,
                 "probes the loss ratio is taken over")
          .param("down_after", param_kind::duration, &S::limits, &thresholds::down_after,
                 "no probe answered this long: down")
          .param("degraded_misses", param_kind::integer, &S::limits, &thresholds::degraded_misses,
                 "probes unanswered in a row: degraded (0 = off)")
          .param("loss_degraded", param_kind::number, &S::limits, &thresholds::loss_degraded,
                 "probe loss ratio: degraded (0 = off)")
          .param("rtt_degraded", param_kind::duration, &S::limits, &thresholds::rtt_degraded,
                 "smoothed RTT above this: degraded (0 = off)")
          .param("retransmit_degraded", param_kind::number, &S::limits,
                 &thresholds::retransmit_degraded,
                 "data-plane re-sends per second above this: degraded (0 = off)")
          .param("backlog_degraded", param_kind::duration, &S::limits,
                 &thresholds::backlog_degraded,
                 "backlog needing longer than this at capacity: degraded (0 = off)")
          .param("recover_ratio", param_kind::number, &S::limits, &thresholds::recover_ratio,
                 "leave degraded only once every signal is below this fraction of its threshold")
          .param("degrade_dwell", param_kind::duration, &S::limits, &thresholds::degrade_dwell,
                 "a worse state must persist this long")
          .param("recover_dwell", param_kind::duration, &S::limits, &thresholds::recover_dwell,
                 "a better state must persist this long")
          .spec({"capacity", param_kind::rate, "",
                 "link rate; default: the deployment's links[].rate"})
          .spec({"subscribers", param_kind::string, "",
                 "node/actor addresses LinkState goes to, comma-separated"});
  return schema;
}

monitor_settings read_settings(const actor_params& p) {
  monitor_settings c = monitor_schema().read(p);
  c.limits.loss_min_probes =
      std::min<size_t>(c.probe_window, std::max<size_t>(1, c.probe_window / 2));
  if (p.has("capacity"))
    c.capacity_bps = static_cast<double>(p.rate("capacity"));
  return c;
}

void register_types(actor_registry& r) {
  r.add(
      {.name = "link_monitor",
       .doc = "one end of a cross-cluster link: RTT, throughput, backlog, state (up/degraded/down)",
       .params = monitor_schema().specs(),
       .factory =
           [](node_context& ctx, const std::string& name, const actor_params& p) {
             auto c = read_settings(p);
             c.cluster = ctx.cluster();
             if (c.capacity_bps == 0)
               if (auto* l = ctx.deployment().find_link(c.cluster, c.peer_cluster))
                 c.capacity_bps = static_cast<double>(l->rate_bps);
             auto subs = split_addresses(p.has("subscribers") ? p.str("subscribers") : "", name);
             return ctx.system().spawn(link_monitor, &ctx, name, c, subs);
           },
       .check =
           [](const std::string& path, const actor_params& p) {
             auto c = read_settings(p);
             auto positive = [&](const char* key, duration d) {
               if (d <= duration{0})
                 throw config_error(path + "." + key, "must be positive");
             };
             positive("probe_interval", c.probe_interval);
             positive("probe_timeout", c.probe_timeout);
             positive("publish_interval", c.publish_interval);
             positive("down_after", c.limits.down_after);
             if (p.integer("probe_window") < 1)
               throw config_error(path + ".probe_window", "must be at least 1");
             if (p.integer("degraded_misses") < 0)
               throw config_error(path + ".degraded_misses", "must not be negative");
             if (c.limits.loss_degraded < 0 || c.limits.loss_degraded > 1)
               throw config_error(path + ".loss_degraded", "must be within [0, 1]");
             if (c.limits.recover_ratio <= 0 || c.limits.recover_ratio > 1)
               throw config_error(path + ".recover_ratio", "must be within (0, 1]");
             if (c.limits.down_after <= c.probe_interval)
               throw config_error(path + ".down_after", "must be longer than probe_interval");
             if (p.has("subscribers"))
               split_addresses(p.str("subscribers"), path + ".subscribers");
           },
       .check_deployment =
           [](const std::string& path, const actor_params& p, const deployment_config& dep) {
             auto peer = p.str("peer_cluster");
             if (!dep.clusters.empty() && !dep.clusters.count(peer))
               throw config_error(path + ".peer_cluster",
                                  "no cluster \"" + peer + "\" in clusters");
             for (auto& n : dep.nodes)
               if (n.cluster == peer)
                 for (auto& a : n.actors)
                   if (a.type == "link_monitor")
                     return;
             throw config_error(path + ".peer_cluster",
                                "no link_monitor on any node of cluster \"" + peer + "\" to probe");
           }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::link

// `kv_directory`: the global KVCache manager (docs/architecture.md). Keeps a
// prefix_index of which worker holds which chained prefix block and answers
// directory.PrefixQuery with the longest match per cluster and per node.
//
// Soft state, owned by this actor alone and rebuilt rather than persisted:
//  * fed one-way by the workers' BlocksStored / BlocksEvicted (their pools' events);
//  * on start it asks every worker of the `holders` types in the deployment for its
//    holdings (Reannounce); until all answered or `rebuild_window` passed, answers
//    carry `rebuilding = true` so the scheduler routes cache-blind instead of
//    trusting an empty index;
//  * when the failure detector reports a node down, the node's entries are dropped
//    (its blocks are unreachable); when it comes back, its workers are asked again.
// Exposes prfaas_kv_directory_{entries,rebuilding} gauges and
// _{queries,hit_blocks,evictions,stale_reports,dropped_blocks}_total counters.

#include <set>
#include <sstream>

#include <stdexcept>

#include <caf/all.hpp>

#include "common/crash_log.hpp"

#include "kv_directory/prefix_index.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/probes.hpp"
#include "prfaas/messages/kv_directory.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/runtime/settings_schema.hpp"
#include "prfaas/wire/directory.pb.h"

namespace prfaas::directory {

namespace {

struct directory_metrics {
  directory_metrics(metrics& m, const std::string& name)
      : entries(m.gauge("prfaas_kv_directory_entries", "Block ids in the directory's index",
                        {{"directory", name}})),
        rebuilding(m.gauge("prfaas_kv_directory_rebuilding",
                           "1 while the directory waits for workers' re-announcements",
                           {{"directory", name}})),
        queries(m.counter("prfaas_kv_directory_queries_total", "Prefix queries answered",
                          {{"directory", name}})),
        hit_blocks(m.counter("prfaas_kv_directory_hit_blocks_total",
                             "Sum over queries of the longest matched prefix, in blocks",
                             {{"directory", name}})),
        evictions(m.counter("prfaas_kv_directory_evictions_total",
                            "Index entries evicted to stay within capacity",
                            {{"directory", name}})),
        stale(m.counter("prfaas_kv_directory_stale_reports_total",
                        "Worker reports ignored for an epoch older than the one known",
                        {{"directory", name}})),
        dropped(m.counter("prfaas_kv_directory_dropped_blocks_total",
                          "Block references dropped because their node went down",
                          {{"directory", name}})) {}

  prometheus::Gauge& entries;
  prometheus::Gauge& rebuilding;
  prometheus::Counter& queries;
  prometheus::Counter& hit_blocks;
  prometheus::Counter& evictions;
  prometheus::Counter& stale;
  prometheus::Counter& dropped;
};

struct directory_state {
  static inline const char* name = "kv_directory";
  std::unique_ptr<prefix_index> index;
  std::unique_ptr<directory_metrics> stats;
  index_stats last;              ///< counters already added to the metrics
  std::set<std::string> pending; ///< "node/actor" of workers yet to re-announce
  bool rebuilding = true;
  /// Nodes whose entries were dropped (down, or unreachable when asked): their
  /// workers are asked again when the node is back.
  std::map<std::string, std::set<std::string>> dropped;
};

using self_ptr = caf::stateful_actor<directory_state>*;

std::vector<address> holders_of(const deployment_config& dep, const std::set<std::string>& types) {
  std::vector<address> out;
  for (auto& n : dep.nodes)
    for (auto& a : n.actors)
      if (types.count(a.type))
        out.push_back({n.name, a.name});
  return out;
}

std::set<std::string> split_types(const std::string& list) {
  std::set<std::string> out;
  std::stringstream in{list};
  std::string item;
  while (std::getline(in, item, ',')) {
    auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b != std::string::npos)
      out.insert(item.substr(b, e - b + 1));
  }
  return out;
}

void sync_metrics(self_ptr self) {
  auto& s = self->state;
  auto now = s.index->stats();
  s.stats->entries.Set(static_cast<double>(now.entries));
  s.stats->rebuilding.Set(s.rebuilding ? 1.0 : 0.0);
  s.stats->queries.Increment(static_cast<double>(now.queries - s.last.queries));
  s.stats->hit_blocks.Increment(static_cast<double>(now.hit_blocks - s.last.hit_blocks));
  s.stats->evictions.Increment(static_cast<double>(now.evictions - s.last.evictions));
  s.stats->stale.Increment(static_cast<double>(now.stale_reports - s.last.stale_reports));
  s.last = now;
}

holder_ref holder_from(const std::string& node, const std::string& actor,
                       const std::string& cluster, const remote_message& msg,
                       const deployment_config& dep) {
  holder_ref h{node.empty() ? msg.source.node : node, actor.empty() ? msg.source.actor : actor,
               cluster};
  if (h.cluster.empty())
    if (auto* n = dep.find_node(h.node))
      h.cluster = n->cluster;
  return h;
}

void apply_stored(self_ptr self, node_context* ctx, const BlocksStored& m,
                  const remote_message& msg) {
  std::vector<chain> chains;
  chains.reserve(static_cast<size_t>(m.chains_size()));
  for (auto& c : m.chains()) {
    chain out;
    if (c.has_parent())
      out.parent = c.parent();
    out.ids.assign(c.block_ids().begin(), c.block_ids().end());
    chains.push_back(std::move(out));
  }
  auto h = holder_from(m.node(), m.actor(), m.cluster(), msg, ctx->deployment());
  try {
    self->state.index->store(h, m.epoch(), static_cast<tier>(m.tier()), chains);
  } catch (const std::length_error& e) { // more holders than the index can name
    ctx->log()->warn("kv_directory_refused node={} actor={} reason=\"{}\"", m.node(), m.actor(),
                     e.what());
  }
  sync_metrics(self);
}

void end_rebuild(self_ptr self, node_context* ctx, const char* why) {
  auto& s = self->state;
  if (!s.rebuilding)
    return;
  s.rebuilding = false;
  ctx->log()->info("kv_directory_rebuilt why={} missing={} entries={}", why, s.pending.size(),
                   s.index->size());
  s.pending.clear();
  sync_metrics(self);
}

/// Asks `worker` for its holdings; `initial` ones count toward the rebuild.
void reannounce(self_ptr self, node_context* ctx, const address& me, const address& worker,
                duration timeout, const std::string& reason, bool initial) {
  Reannounce ask;
  ask.set_reason(reason);
  // What fits one envelope: ~10 bytes per packed id, with room for the rest.
  ask.set_max_blocks(static_cast<uint32_t>(
      std::min<uint64_t>(ctx->msgr().config().max_envelope_bytes / 16, UINT32_MAX)));
  const auto key = worker.to_string();
  remote_ref<kv_holder_role>(ctx->msgr(), me, worker)
      .request(self, ask, timeout)
      .then(
          [self, ctx, key, initial](BlocksStored& held, remote_message& r) {
            if (held.chains_size() > 0)
              ctx->probe("kv_directory.rebuild");
            apply_stored(self, ctx, held, r);
            if (initial && self->state.pending.erase(key) && self->state.pending.empty())
              end_rebuild(self, ctx, "all_answered");
          },
          [self, ctx, worker, key, initial](caf::error& e) {
            // Unreachable now: ask again when its node is (back) up.
            self->state.dropped[worker.node].insert(worker.actor);
            ctx->log()->info("kv_directory_reannounce_failed worker={} error={}", key, describe(e));
            if (initial && self->state.pending.erase(key) && self->state.pending.empty())
              end_rebuild(self, ctx, "all_answered");
          });
}

PrefixMatch to_wire(const match_result& r, bool rebuilding) {
  PrefixMatch out;
  for (auto& n : r.nodes) {
    auto* m = out.add_nodes();
    m->set_node(n.holder.node);
    m->set_actor(n.holder.actor);
    m->set_cluster(n.holder.cluster);
    m->set_matched_blocks(n.blocks);
    m->set_slowest_tier(static_cast<Tier>(n.slowest));
  }
  for (auto& c : r.clusters) {
    auto* m = out.add_clusters();
    m->set_cluster(c.cluster);
    m->set_matched_blocks(c.blocks);
    for (auto i : c.best)
      m->add_best(static_cast<uint32_t>(i));
  }
  out.set_longest_blocks(r.longest);
  out.set_rebuilding(rebuilding);
  return out;
}

/// A node went down (its blocks leave the index; re-announces it owed are no longer
/// awaited) or came back (its workers that were dropped are asked to re-announce).
void on_membership(self_ptr self, node_context* ctx, const address& me, duration window,
                   const membership_event& e) {
  auto& s = self->state;
  if (e.state == peer_state::down) {
    std::set<std::string> names;
    for (auto& h : s.index->holders_on(e.peer))
      names.insert(h.actor);
    auto n = s.index->drop_node(e.peer);
    s.stats->dropped.Increment(static_cast<double>(n));
    // Its workers cannot answer a re-announce now: stop waiting, ask them later.
    bool waited = false;
    for (auto i = s.pending.begin(); i != s.pending.end();)
      if (i->compare(0, e.peer.size() + 1, e.peer + "/") == 0) {
        names.insert(i->substr(e.peer.size() + 1));
        i = s.pending.erase(i);
        waited = true;
      } else {
        ++i;
      }
    if (!names.empty())
      s.dropped[e.peer].insert(names.begin(), names.end());
    if (waited && s.pending.empty())
      end_rebuild(self, ctx, "all_answered");
    ctx->log()->info("kv_directory_node_down node={} dropped_blocks={}", e.peer, n);
    sync_metrics(self);
  } else if (e.state == peer_state::up) {
    auto i = s.dropped.find(e.peer);
    if (i == s.dropped.end())
      return;
    auto actors = std::move(i->second);
    s.dropped.erase(i);
    for (auto& a : actors)
      reannounce(self, ctx, me, address{e.peer, a}, window, "node_back", false);
  }
}

/// What a directory runs with; the defaults are written here only (the parameter
/// specs are rendered from them).
struct directory_settings {
  size_t capacity = 1'000'000;
  duration rebuild_window = std::chrono::seconds(5);
  std::string holders = "prefill_worker";
};

const settings_schema<directory_settings>& directory_schema() {
  using S = directory_settings;
  static const auto schema =
      settings_schema<S>{}
          .param("capacity", param_kind::integer, &S::capacity,
                 "block ids indexed at most; beyond, least recently used chain tails go")
          .param("rebuild_window", param_kind::duration, &S::rebuild_window,
                 "after a start, how long answers say `rebuilding` while workers re-announce")
          .param("holders", param_kind::string, &S::holders,
                 "comma-separated actor types whose pools are asked to re-announce");
  return schema;
}

caf::behavior kv_directory(self_ptr self, node_context* ctx, std::string name,
                           directory_settings cfg) {
  auto& s = self->state;
  log_crashes(self, ctx, name);
  s.index = std::make_unique<prefix_index>(cfg.capacity);
  s.stats = std::make_unique<directory_metrics>(ctx->node_metrics(), name);
  const auto window = cfg.rebuild_window;
  const auto me = ctx->local(name);
  const auto workers = holders_of(ctx->deployment(), split_types(cfg.holders));
  self->send(ctx->transport(), caf::subscribe_atom_v, caf::actor_cast<caf::actor>(self));
  for (auto& w : workers)
    s.pending.insert(w.to_string());
  for (auto& w : workers)
    reannounce(self, ctx, me, w, window, "directory_start", true);
  if (s.pending.empty())
    s.rebuilding = false;
  else
    self->delayed_send(self, window, caf::timeout_atom_v);
  sync_metrics(self);
  ctx->log()->info("kv_directory_started name={} capacity={} workers={} rebuild_window_ms={}", name,
                   s.index->capacity(), workers.size(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(window).count());

  return {
      [=](caf::timeout_atom) { end_rebuild(self, ctx, "window_passed"); },
      [=](const membership_event& e) { on_membership(self, ctx, me, window, e); },
      [=](remote_message& msg) -> caf::result<remote_message> {
        auto& s = self->state;
        return dispatch<kv_directory_role>(
            *ctx, msg,
            [&](BlocksStored& m) {
              if (ctx->faults().fire("kv_directory.crash"))
                throw std::runtime_error(
                    "fault point kv_directory.crash: crashing on a report from " + m.node());
              apply_stored(self, ctx, m, msg);
            },
            [&](BlocksEvicted& m) {
              std::vector<block_id> ids(m.block_ids().begin(), m.block_ids().end());
              auto h = holder_from(m.node(), m.actor(), m.cluster(), msg, ctx->deployment());
              try {
                s.index->evict(h, m.epoch(), static_cast<tier>(m.tier()), ids);
              } catch (const std::length_error& e) {
                ctx->log()->warn("kv_directory_refused node={} actor={} reason=\"{}\"", m.node(),
                                 m.actor(), e.what());
              }
              sync_metrics(self);
            },
            [&](PrefixQuery& q) {
              auto r =
                  s.index->match({q.block_ids().data(), static_cast<size_t>(q.block_ids_size())});
              sync_metrics(self);
              return to_wire(r, s.rebuilding);
            });
      },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "kv_directory",
         .doc = "global KVCache directory: which cluster and node hold which prefix blocks",
         .params = directory_schema().specs(),
         .factory =
             [](node_context& ctx, const std::string& name, const actor_params& p) {
               return ctx.system().spawn(kv_directory, &ctx, name, directory_schema().read(p));
             },
         .check =
             [](const std::string& path, const actor_params& p) {
               if (p.integer("capacity") < 1)
                 throw config_error(path + ".capacity", "must be at least 1");
               if (p.dur("rebuild_window") <= duration{0})
                 throw config_error(path + ".rebuild_window", "must be positive");
               if (split_types(p.str("holders")).empty())
                 throw config_error(path + ".holders", "names no actor type");
             }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

// Its rare paths (a chaos run shows which it took) and its fault points.
PRFAAS_REGISTER_PROBES(kv_directory,
                       {"kv_directory.rebuild",
                        "a restarted KV directory is rebuilt from a worker's re-announcement"})
PRFAAS_REGISTER_FAULT_POINTS(
    kv_directory,
    {"kv_directory.crash",
     "the KV directory crashes (throws) on a stored/evicted report; it restarts empty"})

} // namespace prfaas::directory

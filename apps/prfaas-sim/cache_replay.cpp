#include "cache_replay.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_set>

#include "gateway/openai.hpp"
#include "kv_directory/prefix_index.hpp"
#include "prefill/prefix_cache.hpp"
#include "prfaas/engine/block_hash.hpp"
#include "prfaas/engine/clock.hpp"
#include "prfaas/engine/profile_engine.hpp"

namespace prfaas::sim {

namespace {

using engine::block_id;
using engine::pool_event;

/// Bytes the profile engine fills per profiled byte. The pool only counts blocks, so
/// the smallest scale (empty buffers) leaves the engine its bookkeeping alone.
constexpr double kv_scale = 1e-12;

/// Epoch of every worker's reports: workers never restart in a replay.
constexpr uint64_t report_epoch = 1;

/// A prefill worker: its prefix cache, the engine that fills it, and the prefills it
/// has not finished, in service order, in virtual time.
struct sim_worker {
  struct job {
    double finish_s;
    uint32_t load_tokens; ///< what the worker's load report counts for it
  };

  directory::holder_ref holder;
  std::unique_ptr<engine::profile_engine> engine;
  std::unique_ptr<serving::prefix_cache> cache; ///< null when cache_blocks is 0
  std::vector<pool_event> changes;              ///< the cache's, since the last prefill
  std::deque<job> jobs;
  uint64_t queued_tokens = 0; ///< load_tokens of `jobs`, as the worker reports them
  double free_at_s = 0;
};

/// What one prefill did to its worker's cache, heard by the directory at `at_s`.
struct announcement {
  size_t worker;
  std::vector<pool_event> changes;
};

/// The worker's report to the KV directory, in prefill_worker's order: stores, then
/// evictions, KV blocks only (checkpoints are not announced).
void announce(directory::prefix_index& index, const directory::holder_ref& h,
              const std::vector<pool_event>& changes) {
  std::vector<directory::chain> stored;
  std::vector<block_id> evicted;
  for (auto& ev : changes) {
    if (ev.key.kind != engine::entry_kind::kv)
      continue;
    if (ev.what == pool_event::type::stored)
      stored.push_back({ev.parent, {ev.key.id}});
    else
      evicted.push_back(ev.key.id);
  }
  if (!stored.empty())
    index.store(h, report_epoch, directory::tier::device, stored);
  if (!evicted.empty())
    index.evict(h, report_epoch, directory::tier::device, evicted);
}

/// Retires the prefills finished by `now` and refreshes the load the policy sees, as a
/// LoadQuery answered at `now` would (queue = waiting, active = running).
void report_load(sim_worker& w, serving::worker_view& v, double now) {
  while (!w.jobs.empty() && w.jobs.front().finish_s <= now) {
    w.queued_tokens -= w.jobs.front().load_tokens;
    w.jobs.pop_front();
  }
  v.active = w.jobs.empty() ? 0 : 1;
  v.queue = static_cast<uint32_t>(w.jobs.size()) - v.active;
  v.queued_tokens = w.queued_tokens;
  v.assigned = 0;
  v.assigned_tokens = 0;
}

struct prefill_outcome {
  uint32_t reuse_blocks = 0;
  uint32_t reuse_tokens = 0;
  double seconds = 0;
};

/// One prefill as prefill_worker runs it: acquire the cached prefix, prefill the rest,
/// publish the new blocks, release.
prefill_outcome run_prefill(sim_worker& w, std::span<const engine::token> prompt,
                            engine::seq_id seq, uint32_t block_tokens) {
  serving::prefix_cache::lookup hit;
  engine::prefill_request req;
  req.id = seq;
  req.prompt = prompt;
  if (w.cache) {
    hit = w.cache->acquire(prompt);
    req.reuse = hit.reuse;
    req.reuse_tokens = hit.reuse_tokens(block_tokens);
    req.checkpoint_interval = block_tokens;
  }
  auto r = w.engine->prefill(req, {});
  if (!r) // the replay built this request itself: a refusal is a defect, not bad input
    throw std::logic_error("cache replay: prefill on " + w.holder.node + " failed: " + r.message());
  if (w.cache) {
    w.cache->publish(*w.engine, seq, hit);
    w.cache->release(hit);
  }
  w.engine->release(seq);
  return {hit.reuse_blocks, req.reuse_tokens,
          std::chrono::duration<double>(r->modeled_time).count()};
}

void count_request(hit_counts& h, size_t prompt, uint32_t reuse_blocks, uint32_t block_tokens) {
  h.requests += 1;
  h.prompt_tokens += prompt;
  h.prompt_blocks += (prompt + block_tokens - 1) / block_tokens;
  h.hit_blocks += reuse_blocks;
  h.hit_tokens += uint64_t{reuse_blocks} * block_tokens;
}

/// The profile with one group of its layer pattern (its linear layers, then one full):
/// the same T_prefill, but the engine cuts a block's KV for one full layer instead of
/// for every one — the pool counts blocks, and that cut was most of the replay's time.
engine::profile one_group(engine::profile p) {
  p.layers = p.linear_per_full + 1;
  return p;
}

/// The replay's workers and the view the policy decides on, index for index.
struct sim_cluster {
  serving::cluster_view view;
  std::vector<std::unique_ptr<sim_worker>> workers; ///< stable addresses (listeners)
};

sim_cluster build(const replay_deployment& dep, const replay_options& o, engine::clock& clk) {
  sim_cluster out;
  for (auto& c : dep.clusters) {
    for (uint32_t i = 0; i < c.prefill_workers; ++i) {
      auto w = std::make_unique<sim_worker>();
      w->holder = {c.name + "-" + std::to_string(i), "prefill", c.name};
      auto e = engine::profile_engine::create(
          one_group(c.profile), {.kv_scale = kv_scale, .sleep = false, .verify_content = false},
          clk);
      if (!e)
        throw std::invalid_argument("cluster " + c.name + ": " + e.message());
      w->engine = std::move(e).value();
      if (c.cache_blocks > 0)
        w->cache = std::make_unique<serving::prefix_cache>(
            o.block_tokens, c.cache_blocks,
            [changes = &w->changes](const pool_event& ev) { changes->push_back(ev); });
      out.view.prefill.push_back(
          {.addr = {w->holder.node, w->holder.actor}, .cluster = c.name, .prfaas = c.prfaas});
      out.workers.push_back(std::move(w));
    }
  }
  // Decode is not modelled: every decode worker always has room.
  for (uint32_t i = 0; i < dep.decode_workers; ++i)
    out.view.decode.push_back({.addr = {"decode-" + std::to_string(i), "decode"}, .capacity = 1});
  if (out.view.prefill.empty())
    throw std::invalid_argument("cache replay: the deployment has no prefill workers");
  if (out.view.decode.empty())
    throw std::invalid_argument("cache replay: the deployment has no decode workers");
  return out;
}

} // namespace

std::vector<engine::token> prompt_tokens(const loadgen::request_spec& r) {
  return serving::tokenize(loadgen::prompt_text(r));
}

namespace {

/// How the choice stands against the best cached prefix on either side: the tokens the
/// chosen worker had (a move brings the other side's over), and the misses counted.
uint32_t judge_placement(const serving::route_input& in, const serving::cluster_view& view,
                         int chosen, bool move, replay_result& out) {
  const auto& w = view.prefill[chosen];
  const uint32_t said = serving::cached_on(in, w);
  uint32_t best_same = 0, best_other = 0;
  for (auto& v : view.prefill) {
    auto& best = v.prfaas == w.prfaas ? best_same : best_other;
    best = std::max(best, serving::cached_on(in, v));
  }
  const uint32_t got = move ? std::max(said, best_other) : said;
  if (best_same > got)
    ++out.missed_affinity;
  else if (best_other > got)
    ++out.missed_other_side;
  out.missed_tokens += std::max({got, best_same, best_other}) - got;
  return got;
}

/// The worker takes a job of `seconds` arriving at `now`, first come first served;
/// returns when it finishes.
double serve(sim_worker& w, double now, double seconds, uint32_t load, replay_result& out) {
  const double finish = std::max(now, w.free_at_s) + seconds;
  w.free_at_s = finish;
  w.jobs.push_back({finish, load});
  w.queued_tokens += load;
  out.busy_s += seconds;
  out.makespan_s = std::max(out.makespan_s, finish);
  for (auto& ev : w.changes)
    if (ev.key.kind == engine::entry_kind::kv && ev.what == pool_event::type::evicted)
      ++out.cache_evictions;
  return finish;
}

} // namespace

replay_result replay(const std::vector<loadgen::request_spec>& requests,
                     serving::routing_policy& policy, const replay_deployment& dep,
                     const replay_options& o) {
  engine::manual_clock clk; // the engines only report their modeled time
  auto sim = build(dep, o, clk);
  auto& view = sim.view;
  directory::prefix_index index(o.index_capacity);
  std::multimap<double, announcement> unheard; // by the time the directory hears it
  const engine::block_hasher hasher{o.block_tokens};
  replay_result out;
  out.policy = policy.name();
  engine::seq_id seq = 0;

  for (auto& r : requests) {
    const double now = r.arrival_s;
    for (auto it = unheard.begin(); it != unheard.end() && it->first <= now; it = unheard.erase(it))
      announce(index, sim.workers[it->second.worker]->holder, it->second.changes);
    for (size_t i = 0; i < sim.workers.size(); ++i)
      report_load(*sim.workers[i], view.prefill[i], now);

    const auto prompt = prompt_tokens(r);
    const auto ids = hasher.hash(prompt);
    serving::route_input in;
    in.prompt_tokens = static_cast<uint32_t>(prompt.size());
    in.block_ids = ids;
    if (!ids.empty())
      for (auto& n : index.match(ids).nodes)
        in.cached_by_node[n.holder.node + "/" + n.holder.actor] = n.blocks * o.block_tokens;

    const auto choice = policy.decide(in, view);
    if (choice.prefill < 0 || choice.decode < 0) {
      ++out.no_route;
      count_request(out.hits, prompt.size(), 0, o.block_tokens);
      continue;
    }
    auto& w = *sim.workers[choice.prefill];
    // A cache move: the best prefix of the other side is imported before computing.
    uint32_t held_before_move = 0;
    const bool move = choice.move_cache && choice.cache_source >= 0 && w.cache &&
                      sim.workers[choice.cache_source]->cache;
    if (move) {
      const auto before = w.cache->acquire(prompt);
      w.cache->release(before);
      held_before_move = before.reuse_blocks;
      w.cache->import_prefix(sim.workers[choice.cache_source]->cache->export_prefix(ids));
      ++out.cache_moves;
    }
    const uint32_t got = judge_placement(in, view, choice.prefill, move, out);

    const auto run = run_prefill(w, prompt, ++seq, o.block_tokens);
    count_request(out.hits, prompt.size(), run.reuse_blocks, o.block_tokens);
    if (move && run.reuse_blocks > held_before_move)
      out.moved_tokens += uint64_t{run.reuse_blocks - held_before_move} * o.block_tokens;
    if (got > run.reuse_tokens)
      out.directory_overstated_tokens += got - run.reuse_tokens;
    else
      out.directory_understated_tokens += run.reuse_tokens - got;
    if (view.prefill[choice.prefill].prfaas)
      ++out.offloaded;

    // FIFO service in virtual time; the directory hears of the new blocks at the end.
    const uint32_t load =
        o.load_counts_computed ? in.prompt_tokens - run.reuse_tokens : in.prompt_tokens;
    const double finish = serve(w, now, run.seconds, load, out);
    if (!w.changes.empty())
      unheard.emplace(finish,
                      announcement{static_cast<size_t>(choice.prefill), std::move(w.changes)});
    w.changes.clear();
  }
  return out;
}

hit_counts oracle(const std::vector<loadgen::request_spec>& requests, const replay_options& o) {
  const engine::block_hasher hasher{o.block_tokens};
  std::unordered_set<block_id> seen;
  hit_counts h;
  for (auto& r : requests) {
    const auto prompt = prompt_tokens(r);
    const auto ids = hasher.hash(prompt);
    // Chained ids: a block seen before means its whole prefix was seen before.
    uint32_t k = 0;
    while (k < ids.size() && seen.count(ids[k]))
      ++k;
    if (k > 0 && uint64_t{k} * o.block_tokens >= prompt.size())
      --k; // the last token must be computed to sample the first output token
    count_request(h, prompt.size(), k, o.block_tokens);
    seen.insert(ids.begin(), ids.end());
  }
  return h;
}

} // namespace prfaas::sim

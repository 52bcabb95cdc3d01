#pragma once

// Prefix-cache replay: how much of a trace's prompts a routing policy finds cached,
// against an oracle with unlimited cache and perfect affinity. It drives the real
// parts — the routing policy (policy_registry), one prefix_cache per prefill worker
// (the engine's block pool, filled through a profile engine) and the KV directory's
// prefix_index — in trace order, in virtual time, without actors or a network.
//
// Per request, at its arrival time t:
//   1. the directory learns every store/evict a worker announced by t (a worker
//      announces when its prefill finishes, as prefill_worker does);
//   2. the prompt is the text prfaas-bench sends for the trace record, cut into
//      chained block ids exactly as the gateway does (block_hasher, byte tokens);
//   3. route_input.cached_by_node = prefix_index::match() × block_tokens per worker,
//      as the scheduler fills it; worker loads are exact at t (no polling lag);
//   4. policy.decide(); the chosen worker's prefix cache is looked up (the hit), the
//      prompt prefilled on its engine and its blocks published, as prefill_worker does.
// Each prefill worker is one FIFO server whose service time is the profile's
// T_prefill(uncached tokens). Because a worker serves in arrival order, doing its
// cache operations at routing time gives the same cache contents as doing them at
// service time; only the directory lags (it hears at the prefill's end).
//
// A cache move the policy asks for (move_cache, cache_source) happens at routing time
// and costs nothing: the moved blocks are imported into the chosen worker's cache.
//
// Not modelled: decode (workers always have room), the cross-cluster link (always
// up, idle: bandwidth stays abundant unless the PrfaaS queue says otherwise, and moves
// take no time), queue limits (max_queue), failures.

#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/workload.hpp"
#include "prfaas/engine/profile.hpp"
#include "prfaas/engine/types.hpp"
#include "scheduler/policy.hpp"

namespace prfaas::sim {

/// One cluster's prefill workers in a replayed deployment.
struct replay_cluster {
  std::string name;
  bool prfaas = false; ///< a prefill-only (PrfaaS) cluster
  uint32_t prefill_workers = 0;
  /// Prefix-cache capacity per worker in pool blocks, as the prefill_worker's
  /// `cache_blocks`: a cached block costs two (its KV and its linear-state checkpoint).
  uint64_t cache_blocks = 0;
  engine::profile profile; ///< T_prefill of its workers
};

struct replay_deployment {
  std::vector<replay_cluster> clusters;
  uint32_t decode_workers = 1;
};

struct replay_options {
  uint32_t block_tokens = 512;             ///< model.block_tokens: how prompts are cut
  size_t index_capacity = size_t{1} << 22; ///< KV directory entries
  /// What a worker's load report counts as its queued tokens: true = only the tokens
  /// it computes for its unfinished prefills (cached prefixes left out), as
  /// prefill_worker and the scheduler count load; false = their prompt tokens (what
  /// they counted before, which made a worker look busy with its own cache hits).
  bool load_counts_computed = true;
};

/// Hit counts of one replay (a policy's, or the oracle's).
struct hit_counts {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t prompt_blocks = 0; ///< ceil(prompt / block_tokens) per request
  uint64_t hit_tokens = 0;    ///< prompt tokens reused from a cache
  uint64_t hit_blocks = 0;    ///< the same in blocks

  double token_ratio() const {
    return prompt_tokens ? double(hit_tokens) / double(prompt_tokens) : 0;
  }
  double block_ratio() const {
    return prompt_blocks ? double(hit_blocks) / double(prompt_blocks) : 0;
  }
};

struct replay_result {
  std::string policy;
  hit_counts hits;
  uint64_t offloaded = 0; ///< requests prefilled in a PrfaaS cluster
  uint64_t no_route = 0;  ///< requests the policy found no worker for (not counted in hits)
  /// Tokens the directory said the chosen worker held beyond what its cache reused
  /// (announcements not yet heard, or blocks whose checkpoint was evicted first).
  uint64_t directory_overstated_tokens = 0;
  /// Tokens the chosen worker reused beyond what the directory said (not yet heard).
  uint64_t directory_understated_tokens = 0;
  /// Requests where, per the directory, a worker of the chosen worker's own cluster
  /// side (PrfaaS or PD) held a longer prefix than the chosen one: load won over cache.
  uint64_t missed_affinity = 0;
  /// Requests where only the other side held a longer prefix: the route (threshold),
  /// not the placement, gave the cache up.
  uint64_t missed_other_side = 0;
  uint64_t missed_tokens = 0; ///< cached tokens given up by both kinds of miss, per directory
  /// Cache moves (the policy's move_cache): the chosen worker imports the best prefix
  /// from `cache_source`'s cache before it computes, as prefill_worker pulls it.
  uint64_t cache_moves = 0;
  uint64_t moved_tokens = 0;    ///< tokens those moves brought in (they count as hits)
  uint64_t cache_evictions = 0; ///< KV blocks evicted from the workers' caches
  double busy_s = 0;            ///< summed prefill service time over all workers
  double makespan_s = 0;        ///< when the last prefill finished

  double offload_fraction() const {
    return hits.requests ? double(offloaded) / double(hits.requests) : 0;
  }
};

/// The prompt prfaas-bench sends for `r`, as the gateway tokenises it (one byte, one token).
std::vector<engine::token> prompt_tokens(const loadgen::request_spec& r);

/// Replays `requests` (arrival order) through `policy` on `dep`. Throws
/// std::invalid_argument for a deployment without prefill workers or decode workers.
replay_result replay(const std::vector<loadgen::request_spec>& requests,
                     serving::routing_policy& policy, const replay_deployment& dep,
                     const replay_options& o);

/// Unlimited cache, perfect affinity: a request reuses the longest prefix of full
/// blocks any earlier request had, leaving at least one token to compute as a real
/// prefill must.
hit_counts oracle(const std::vector<loadgen::request_spec>& requests, const replay_options& o);

} // namespace prfaas::sim

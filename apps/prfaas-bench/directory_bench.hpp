#pragma once

// prfaas-bench directory: the KV directory's index measured the way NVIDIA Dynamo
// measures its KV indexer (lib/kv-router/benches/mooncake_bench.rs): a Mooncake trace
// is replayed through mock workers with bounded caches, whose stored/evicted events
// feed the index, with one prefix-match query per request.
//
// One *op* is, as in Dynamo's "ops/s (requests + events)": one match query (a whole
// request's chain), or one stored event (one worker's newly cached blocks for one
// request, a chain), or one evicted event (the ids one request's inserts pushed out of
// that worker's cache). *Block ops* count the blocks of queries and stored events (as
// Dynamo's "block throughput"; evicted ids are not counted there). Dynamo's published
// indexer figures (Flash Indexer 170M/s on 24 cores, its radix tree 4M/s) are block
// ops/s: its sweep plots "achieved throughput (block ops/s)". So the table leads with
// block ops/s and gives request+event ops/s beside them; this trace has ~22 blocks/op.

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace prfaas::bench {

struct directory_options {
  std::string trace;                    ///< required: a Mooncake-format trace
  uint32_t workers = 16;                ///< mock workers, each an engine::block_pool
  uint64_t worker_blocks = 16384;       ///< each worker's cache, in 512-token blocks
  uint32_t duplicate = 8;               ///< disjoint copies of the trace, interleaved in time
  uint64_t capacity = 1ull << 24;       ///< index capacity (entries)
  uint64_t latency_blocks = 10'000'000; ///< entries the latency index is filled to (at least)
  uint32_t chain_blocks = 256;          ///< blocks per latency query
  uint64_t latency_queries = 200'000;
  /// Blocks stored into the latency index before the queries, in multiples of its size
  /// (0: filled once). Above 1, evictions hand entries out again from the free list, as
  /// in a directory that has run a while; queries then pick among the last quarter of
  /// the chains stored.
  uint32_t latency_churn = 0;
  uint32_t batch = 64;   ///< events per message to the actor (one worker's)
  uint32_t window = 256; ///< queries in flight to the actor
  int repeat = 3;        ///< runs per throughput figure; best and spread shown
  uint64_t seed = 1;
  bool actor = true;   ///< also run through the kv_directory actor
  bool latency = true; ///< also run the 10M-entry latency/memory part
  bool json = false;
};

void add_directory_options(CLI::App& app, directory_options& o);

/// Runs the benchmark and prints its table (and a JSON line); returns an exit code.
int run_directory_bench(const directory_options& o);

} // namespace prfaas::bench

#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::planner {

/// What a trace says about prefill work once a prefix cache has absorbed what it can.
struct trace_lengths {
  std::vector<uint64_t> uncached; ///< per request, in arrival order: l = input − cached
  uint64_t requests = 0;
  double mean_input = 0;    ///< tokens, before the cache
  double mean_uncached = 0; ///< tokens, after the cache
};

/// Uncached prefill lengths of a Mooncake-format JSONL trace ({"input_length": n,
/// "hash_ids": [...]} per line) under an infinite prefix cache in arrival order.
/// hash_ids are chained (equal leading ids ⇔ equal prefix), one per `block_tokens`
/// block, the last possibly partial. Only full blocks are cached and matched; a request
/// reuses its longest run of leading cached blocks, then inserts all its full blocks.
/// At least one token is always prefilled (the last one produces the first logits), so a
/// fully cached request counts 1. `cache = false` gives the raw input lengths.
/// Throws std::runtime_error naming the file and line on unreadable input.
trace_lengths load_trace_lengths(const std::string& path, uint32_t block_tokens = 512,
                                 bool cache = true);

} // namespace prfaas::planner

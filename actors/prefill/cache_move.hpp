#pragma once

// Cache moves between prefill workers (prfaas policy, bandwidth abundant; paper
// §3.4.3): when the longest cached prefix of a prompt sits in the other cluster, the
// prefill worker chosen for it pulls those blocks into its own prefix cache first
// (CachePull to the holder; the blocks come over the KV data plane) and then
// computes only the rest. This file is the wire form of the moved blocks.

#include <optional>
#include <string>
#include <vector>

#include "prefill/prefix_cache.hpp"
#include "prfaas/runtime/data_plane.hpp"

namespace prfaas::serving {

/// A cached prefix as a data-plane transfer: the meta (CacheBlocksMeta) and the
/// serialized chunks, each block's KV in order, then the last block's checkpoint.
struct cache_stream {
  std::string meta;
  std::vector<std::vector<std::byte>> chunks;
};

cache_stream pack(const prefix_cache::exported& x);

/// The blocks of a received cache-move transfer; nullopt with `error` saying what is
/// wrong (meta, counts, or which chunk does not parse) when it is malformed.
std::optional<prefix_cache::exported> unpack(const received_transfer& rt, std::string& error);

} // namespace prfaas::serving

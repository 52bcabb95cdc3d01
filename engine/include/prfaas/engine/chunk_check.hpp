#pragma once

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace prfaas::engine {

/// Expected payload size (bytes) of a chunk with the given layer and range; engine specific.
using payload_size_fn = std::function<uint64_t(uint32_t layer, uint32_t begin, uint32_t end)>;

/// A chunk set that passed check_chunks: indices into the checked span.
struct checked_chunks {
  uint32_t length = 0;                      ///< tokens covered: KV [0, length), state at length
  std::vector<std::vector<size_t>> kv;      ///< per layer: full-layer chunks in token order
  std::vector<std::optional<size_t>> state; ///< per layer: the linear-state chunk
  std::optional<size_t> meta;               ///< the meta chunk, if any
};

/// Validates a set of chunks against a model before anything is imported:
/// payload size and checksum, model fingerprint and layer count, layer kind,
/// token ranges, and coverage — every full layer's chunks tile [0, length) exactly
/// (no gap, no overlap), every linear layer has exactly one state at `length`.
/// With `require_meta`, exactly one meta chunk must be present and defines `length`
/// (then `length` argument is ignored); otherwise meta chunks are rejected.
/// Errors name the chunk by its index in `chunks` and its layer.
result<checked_chunks> check_chunks(const model_info& info, std::span<const kv_chunk> chunks,
                                    uint32_t length, bool require_meta,
                                    const payload_size_fn& expected_payload);

} // namespace prfaas::engine

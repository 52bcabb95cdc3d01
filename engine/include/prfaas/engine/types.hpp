#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prfaas::engine {

/// A token id. The reference engine is byte-level: 0..255 are bytes, 256 is EOS.
using token = int32_t;

/// Engine-local id of a sequence (one request's KV and state). Chosen by the caller.
using seq_id = uint64_t;

/// Chained block hash id (see block_hash.hpp) or a trace's `hash_ids` entry.
using block_id = uint64_t;

/// What a layer keeps per sequence.
enum class layer_kind : uint8_t {
  linear = 1, ///< fixed-size recurrent state; reusable only at the exact length saved
  full = 2,   ///< per-token KV; any prefix of whole blocks is reusable
  meta = 3,   ///< not a layer: the sequence record chunk (tokens, pending token, sampling)
};

const char* to_string(layer_kind kind) noexcept;

/// Per-request sampling. temperature == 0 means greedy (argmax, lowest index wins ties).
/// With temperature > 0 the k-th sampled token of a request draws from a counter-based
/// stream keyed by (seed, k), so sampling needs no hidden RNG state to transfer.
struct sampling_params {
  float temperature = 0.0f;
  uint64_t seed = 0;
  /// k of the first token this prefill samples: 0 for a new request; the number of
  /// tokens already delivered when a request resumes on another decode worker from its
  /// prompt plus those tokens, so it samples exactly what the first worker would have.
  uint32_t first_index = 0;
};

/// Static description of the model an engine instance runs.
struct model_info {
  std::string model;               ///< e.g. "prfaas-ref-hybrid-8l" or "kimi-linear-1t"
  uint64_t fingerprint = 0;        ///< identifies model + weights; every chunk carries it
  std::vector<layer_kind> layers;  ///< kind of each layer, in order
  uint32_t vocab_size = 0;
  token eos_token = -1;
  uint64_t state_bytes_total = 0;  ///< linear state of one sequence, all linear layers

  uint32_t n_layers() const noexcept { return static_cast<uint32_t>(layers.size()); }
  uint32_t n_full() const noexcept;
  uint32_t n_linear() const noexcept;
};

} // namespace prfaas::engine

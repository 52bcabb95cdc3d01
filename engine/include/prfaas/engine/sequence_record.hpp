#pragma once

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace prfaas::engine {

/// Everything besides KV and state that a decode instance needs to continue a
/// sequence bit-exactly; travels as the meta chunk of an export.
struct sequence_record {
  std::vector<token> tokens;  ///< tokens whose KV/state the sequence holds (prompt + fed output)
  uint32_t prompt_tokens = 0; ///< how many of `tokens` are prompt
  token pending = 0;          ///< sampled but not yet fed: the next decode step's input
  uint32_t sampled = 0;       ///< tokens sampled so far; index of the next sampler draw
  sampling_params sampling;
  /// The exporting engine's model identity (engine::model_info::identity), so that an
  /// importer can say which part differs (model, quantisation, format version) before
  /// it touches its state. Empty for engines whose fingerprint says enough.
  std::vector<std::byte> identity;
};

/// Meta chunk (kind meta, layer == n_layers, range [0, tokens.size())).
kv_chunk make_meta_chunk(const model_info& info, const sequence_record& record);

/// The model identity a meta chunk payload carries (empty when it has none), read
/// without validating the rest (its tokens may be of another vocabulary).
result<std::span<const std::byte>> meta_identity(std::span<const std::byte> payload);

/// Decode a meta chunk payload; validates sizes, token ids and sampling parameters.
result<sequence_record> parse_meta_payload(std::span<const std::byte> payload,
                                           const model_info& info, const std::string& label);

} // namespace prfaas::engine

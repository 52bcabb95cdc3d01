#pragma once
// Internal: token sampling shared by the engines.

#include "prfaas/engine/types.hpp"

#include <span>

namespace prfaas::engine {

/// Greedy (temperature 0): argmax, lowest index on ties. Otherwise softmax at the
/// temperature (double precision, index order) and one uniform draw that depends only
/// on (seed, index): the index-th sampled token of a request. Deterministic and
/// stateless, so a transferred sequence samples exactly like the original.
token sample_token(std::span<const float> logits, const sampling_params& params, uint32_t index);

} // namespace prfaas::engine

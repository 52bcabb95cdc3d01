#pragma once
// Internal: token sampling shared by the engines.

#include "prfaas/engine/types.hpp"

#include <optional>
#include <span>

namespace prfaas::engine {

/// A draw: the token, and its log-probabilities when the sequence asked for them.
struct sample_result {
  token id = 0;
  std::optional<sampled_logprobs> logprobs;
};

/// Samples the `index`-th token of a request from `logits` (one per vocabulary entry).
/// `output` is what the request has output so far (for the penalties).
///
/// Processing order: logit_bias, then the penalties, then greedy (argmax, lowest index
/// on ties) or, at temperature > 0, a softmax at the temperature (double precision),
/// restricted to the top_p nucleus, and one uniform draw that depends only on
/// (seed, index). Deterministic and stateless, so a transferred sequence samples
/// exactly like the original. Plain parameters (sampling_params::plain) take the
/// original two-pass path, bit for bit.
/// Log-probabilities are those of the model's own distribution (log-softmax of the raw
/// logits), as OpenAI and vLLM report them.
sample_result sample_token(std::span<const float> logits, const sampling_params& params,
                           uint32_t index, std::span<const token> output = {});

/// The output so far of a sequence whose tokens are `tokens` (prompt, then fed output)
/// with `prompt_tokens` of prompt, the last `first_index` of which were output before a
/// resume: what the penalties count.
std::span<const token> output_window(std::span<const token> tokens, uint32_t prompt_tokens,
                                     uint32_t first_index);

} // namespace prfaas::engine

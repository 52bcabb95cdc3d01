#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
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
/// Everything here travels with a sequence (its meta chunk), so a sequence imported on
/// another node samples exactly as it would have where it was prefilled.
struct sampling_params {
  float temperature = 0.0f;
  uint64_t seed = 0;
  /// k of the first token this prefill samples: 0 for a new request; the number of
  /// tokens already delivered when a request resumes on another decode worker from its
  /// prompt plus those tokens, so it samples exactly what the first worker would have.
  /// The last `first_index` prompt tokens are output (they count for the penalties).
  uint32_t first_index = 0;
  /// Nucleus sampling: only the most likely tokens whose probabilities add up to at
  /// least top_p take part (1 = all). Ignored when greedy.
  float top_p = 1.0f;
  /// OpenAI's penalties, in logits: each token already in the output loses
  /// presence_penalty once and frequency_penalty per occurrence. Range [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  /// Added to a token's logit before sampling (OpenAI's logit_bias, [-100, 100]).
  std::vector<std::pair<int32_t, float>> logit_bias;
  /// -1: no log-probabilities. n >= 0: report the sampled token's log-probability and
  /// the n most likely tokens' (of the model's distribution, before any of the above).
  int32_t logprobs = -1;

  /// True when nothing but temperature (and seed) shapes the draw.
  bool plain() const noexcept {
    return top_p >= 1.0f && presence_penalty == 0.0f && frequency_penalty == 0.0f &&
           logit_bias.empty();
  }
};

/// A token with its log-probability (natural log) under the model's distribution.
struct token_logprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

/// What a sampled token comes with when its sequence asked for log-probabilities.
struct sampled_logprobs {
  token_logprob chosen;
  std::vector<token_logprob> top; ///< the most likely tokens, most likely first
};

/// Static description of the model an engine instance runs.
struct model_info {
  std::string model;              ///< e.g. "prfaas-ref-hybrid-8l" or "kimi-linear-1t"
  uint64_t fingerprint = 0;       ///< identifies model + weights; every chunk carries it
  std::vector<layer_kind> layers; ///< kind of each layer, in order
  uint32_t vocab_size = 0;
  token eos_token = -1;
  /// Tokens that end an output (EOS, end of turn, ...); eos_token among them.
  std::vector<token> end_tokens;
  uint64_t state_bytes_total = 0; ///< linear state of one sequence, all linear layers
  /// What the fingerprint is a hash of, when an engine can say which part of it differs
  /// (model, quantisation, state format): it travels in every exported sequence's meta
  /// chunk. Empty when the fingerprint says enough (reference and profile engines).
  std::vector<std::byte> identity;
  /// Prefills worth computing together (engine::prefill_batch): at most this many
  /// computed tokens in all; 0 = computing them together gains nothing (the default,
  /// which runs them one after the other).
  uint32_t prefill_batch_tokens = 0;

  bool is_end(token t) const noexcept {
    if (t == eos_token)
      return true;
    for (token e : end_tokens)
      if (t == e)
        return true;
    return false;
  }

  uint32_t n_layers() const noexcept { return static_cast<uint32_t>(layers.size()); }
  uint32_t n_full() const noexcept;
  uint32_t n_linear() const noexcept;
};

} // namespace prfaas::engine

#pragma once

#include "prfaas/engine/engine_base.hpp"

#include <memory>
#include <string>

namespace prfaas::engine {

class reference_model;

/// Shape and weights of the tiny hybrid reference model.
struct reference_config {
  uint64_t weight_seed = 1; ///< all weights derive from this seed
  uint32_t d_model = 64;
  uint32_t n_heads = 2;   ///< same head count for linear and full layers
  uint32_t head_dim = 16; ///< multiple of 8, at most 64
  uint32_t mlp_hidden = 128;
  /// One letter per layer: L = linear (gated delta rule), F = full attention.
  std::string layer_pattern = "LLLFLLLF";
  /// Cost model: prefill_seconds()/decode_seconds() = multiply-accumulates × this.
  double seconds_per_mac = 0.25e-9;
};

/// Reference engine: a hybrid transformer computed exactly in float32 on the CPU,
/// single-threaded with a fixed operation order, so the same binary produces the
/// same bits in every instance — prefill here, import there, decode: identical.
/// Tokens are bytes (0..255) plus EOS (256).
class reference_engine final : public engine_base {
public:
  /// Validates the config (pattern letters, head_dim % 8 == 0, non-zero dims).
  static result<std::unique_ptr<reference_engine>> create(const reference_config& config);
  ~reference_engine() override;

  const reference_config& config() const { return config_; }

  result<prefill_result> prefill(const prefill_request& req, const chunk_sink& sink) override;
  result<std::vector<token>> decode_step(std::span<const seq_id> batch) override;
  result<void> import_sequence(seq_id id, std::span<const kv_chunk> chunks) override;

  double prefill_seconds(uint64_t tokens) const override;
  double decode_seconds(uint32_t batch, uint64_t context) const override;
  double kv_bytes(uint64_t tokens) const override;

  /// Bytes of one token's KV in one full layer, and of one linear layer's state.
  uint64_t kv_bytes_per_token_layer() const;
  uint64_t state_bytes_per_layer() const;

  /// The last logits computed for a sequence (after prefill or the latest decode step).
  result<std::vector<float>> last_logits(seq_id id) const;

  /// Byte-level tokenisation: each UTF-8 byte becomes one token.
  static std::vector<token> tokenize(std::string_view text);

private:
  struct sequence;
  reference_engine(const reference_config& config, std::unique_ptr<reference_model> model);

  uint64_t expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const override;
  kv_chunk kv_chunk_of(const sequence_base& s, uint32_t layer, uint32_t begin,
                       uint32_t end) const override;
  /// The current state at the sequence's length, else the prefill checkpoint at `at`.
  kv_chunk state_chunk_of(const sequence_base& s, uint32_t layer, uint32_t at) const override;
  kv_chunk state_chunk_of(uint32_t layer, uint32_t length, const std::vector<float>& st) const;
  bool has_state_at(const sequence_base& s, uint32_t at) const override;
  /// Copies validated chunk payloads into `s` (KV rows [0, length), states).
  void load_chunks(sequence& s, std::span<const kv_chunk> chunks, uint32_t length) const;
  token sample(sequence& s) const;

  reference_config config_;
  std::unique_ptr<reference_model> model_;
};

} // namespace prfaas::engine

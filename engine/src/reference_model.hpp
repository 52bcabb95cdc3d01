#pragma once
// Internal: weights and forward pass of the reference hybrid model.

#include "prfaas/engine/reference_engine.hpp"

#include <functional>
#include <span>
#include <vector>

namespace prfaas::engine {

/// Keys and values of one full-attention layer.
/// Keys are stored transposed in tiles of `tile` positions — kt[tile][head][dim][lane] —
/// so attention scores vectorise across positions without reordering any sum; values
/// are rows v[pos][head][dim]. The wire format (kv_chunk payload) is per token
/// [k(H·Dh) | v(H·Dh)] as float32; read_kv/write_kv convert.
struct kv_cache {
  static constexpr uint32_t tile = 16;
  std::vector<float> kt;
  std::vector<float> v;
  uint32_t length = 0;
};

/// Per-sequence tensors, indexed by layer (empty for layers of the other kind).
/// state[l]: H matrices S of Dh×Dh floats (row r = value dim, column c = key dim).
struct model_tensors {
  std::vector<kv_cache> kv;
  std::vector<std::vector<float>> state;
};

/// Weights plus the exact float32 forward pass. Every per-token computation has a
/// fixed operation order that does not depend on how tokens are grouped into calls,
/// so prefill(a+b) == prefill(a) then forward(b) bit for bit.
class reference_model {
public:
  explicit reference_model(const reference_config& config);

  const reference_config& config() const { return c_; }
  uint32_t n_layers() const { return static_cast<uint32_t>(kinds_.size()); }
  layer_kind kind(uint32_t layer) const { return kinds_[layer]; }
  uint32_t vocab() const { return 257; }
  uint32_t kv_floats_per_token() const { return 2 * c_.n_heads * c_.head_dim; }
  uint32_t state_floats() const { return c_.n_heads * c_.head_dim * c_.head_dim; }
  /// Multiply-accumulates for one token at position `pos` (cost model).
  double macs_per_token(uint64_t pos) const;

  /// Fresh tensors for a sequence (state zero, KV empty).
  model_tensors empty_tensors() const;
  /// Copy token rows [begin, end) of a KV cache out in wire layout.
  void read_kv(const kv_cache& c, uint32_t begin, uint32_t end, float* out) const;
  /// Write token rows [begin, end) in wire layout; grows the cache to `end` if needed.
  void write_kv(kv_cache& c, uint32_t begin, uint32_t end, const float* rows) const;

  /// Called when linear layer `layer` has absorbed exactly `length` tokens.
  using checkpoint_fn =
      std::function<void(uint32_t layer, uint32_t length, const std::vector<float>& state)>;
  /// Called when `layer` has processed all of `input`.
  using layer_done_fn = std::function<void(uint32_t layer)>;

  /// Runs `input` at positions base.. through the model (layer by layer), extending
  /// `t`. Writes the logits of the last input token into `logits` (vocab() floats).
  /// Checkpoints are reported at every multiple of `checkpoint_interval` (0 = none).
  void forward(model_tensors& t, uint32_t base, std::span<const token> input,
               std::span<float> logits, uint32_t checkpoint_interval,
               const checkpoint_fn& on_checkpoint, const layer_done_fn& on_layer) const;

private:
  struct layer_weights {
    std::vector<float> norm1, wq, wk, wv, wo, wa, ba, wb, bb, norm2, w1, w2;
  };
  void linear_layer(const layer_weights& w, std::vector<float>& S, const float* h, float* o) const;
  void full_layer(const layer_weights& w, kv_cache& kv, uint32_t pos, const float* h, float* o,
                  std::vector<float>& scratch) const;
  void grow(kv_cache& c, uint32_t length) const;
  void mlp(const layer_weights& w, float* x, std::vector<float>& scratch) const;

  reference_config c_;
  std::vector<layer_kind> kinds_;
  std::vector<layer_weights> layers_;
  std::vector<float> embed_, final_norm_, unembed_;
};

} // namespace prfaas::engine

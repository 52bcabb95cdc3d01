#pragma once

#include <algorithm>

#include "prfaas/engine/clock.hpp"
#include "prfaas/engine/engine_base.hpp"
#include "prfaas/engine/profile.hpp"

#include <memory>

namespace prfaas::engine {

/// Knobs of the profile engine.
struct profile_engine_config {
  /// Buffers hold kv_scale × the profiled bytes (1.0 = real size; e.g. 1/1024 to move
  /// realistic *shapes* cheaply). Each layer's share is rounded down to whole bytes.
  double kv_scale = 1.0;
  uint64_t seed = 1; ///< content seed: same seed + same tokens ⇒ same bytes
  /// true: prefill/decode take their modeled time through clock::sleep_for (a real
  /// clock sleeps, a manual clock advances virtual time). false: only report it.
  bool sleep = true;
  /// Imports and reuse are compared byte for byte with the content the tokens imply
  /// (catches well-formed chunks of the wrong sequence). Costs one regeneration.
  bool verify_content = true;
  /// false: KV and state payloads are zeros of the right size. Only sizes then mean
  /// anything (a simulation's links count bytes): cutting a chunk costs no per-token
  /// work, and verify_content must be false too.
  bool synthesize_content = true;
};

/// Profile engine: timing and KVCache sizes from a profile, real byte buffers with
/// deterministic content, decode tokens derived from the sequence content. Lets the
/// serving path and data plane run at paper scale without a GPU.
/// The layer pattern comes from the profile (linear_per_full linear layers, then one
/// full). S_kv(0) is the linear state, split evenly over linear layers; the rest of
/// S_kv(l) is KV, split evenly over full layers, by cumulative length so that
/// chunks of a split range add up exactly to the chunk of the whole range.
class profile_engine final : public engine_base {
public:
  /// Fails for phi-only profiles or a non-positive kv_scale. `clk` must outlive the engine.
  static result<std::unique_ptr<profile_engine>> create(profile prof, profile_engine_config config,
                                                        clock& clk);
  ~profile_engine() override;

  const profile& prof() const { return profile_; }

  result<prefill_result> prefill(const prefill_request& req, const chunk_sink& sink) override;
  result<std::vector<token>> decode_step(std::span<const seq_id> batch) override;
  result<void> import_sequence(seq_id id, std::span<const kv_chunk> chunks) override;

  double prefill_seconds(uint64_t tokens) const override {
    return profile_.prefill_seconds(tokens);
  }
  double decode_seconds(uint32_t batch, uint64_t context) const override {
    return profile_.decode_seconds(batch, context);
  }
  double kv_bytes(uint64_t tokens) const override {
    return std::max(0.0, interpolate(kv_knots_, static_cast<double>(tokens)));
  }

  /// Bytes actually produced for a sequence of `tokens` (all layers, scaled).
  uint64_t buffer_bytes(uint64_t tokens) const;

private:
  struct sequence;
  profile_engine(profile prof, profile_engine_config config, clock& clk);

  uint64_t kv_layer_cumulative(uint64_t tokens) const; ///< one full layer, tokens [0, l)
  uint64_t state_layer_bytes() const;                  ///< one linear layer
  uint64_t expected_payload(uint32_t layer, uint32_t begin, uint32_t end) const override;
  kv_chunk kv_chunk_of(const sequence_base& s, uint32_t layer, uint32_t begin,
                       uint32_t end) const override;
  kv_chunk state_chunk_of(const sequence_base& s, uint32_t layer, uint32_t at) const override;
  /// Synthetic state is a function of the prefix: any length in [1, length] will do.
  bool has_state_at(const sequence_base& s, uint32_t at) const override;
  result<void> verify(const sequence& s, std::span<const kv_chunk> chunks,
                      const std::string& who) const;
  void spend(double seconds);

  profile profile_;
  profile_engine_config config_;
  clock& clock_;
  // Cutting a chunk evaluates S_kv once per token: the knots, S_kv(0) and the layer
  // counts are kept rather than rebuilt per call (they were ~35% of a simulation's time).
  std::vector<std::pair<double, double>> kv_knots_;
  double kv_at_zero_ = 0;
  uint32_t n_full_ = 0, n_linear_ = 0;
};

} // namespace prfaas::engine

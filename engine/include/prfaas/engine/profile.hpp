#pragma once

#include "prfaas/engine/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prfaas::engine {

/// One measured prefill point (Table 5 style). Units: MiB = 2^20 bytes, seconds.
struct profile_point {
  uint64_t tokens = 0;
  double kv_mib = 0;              ///< S_kv: KVCache + linear state of one request
  bool has_kv = true;             ///< false: a timing-only point (derived profiles)
  double prefill_s = 0;           ///< T_prefill on one instance
  std::optional<double> phi_gbps; ///< published Φ_kv, for cross-checking only
};

/// Published Φ_kv only (Table 3 models): Gbit/s (1e9 bit/s) at a length.
struct phi_point {
  uint64_t tokens = 0;
  double phi_gbps = 0;
};

/// Decode step time T_step(b, c) = step_base_s + b · (per_seq_s + per_ctx_token_s · c)
/// for a batch of b sequences with mean context c tokens.
struct decode_model {
  double slo_tokens_per_s = 0; ///< decode SLO: one step must take <= 1 / slo
  double step_base_s = 0;
  double per_seq_s = 0;
  double per_ctx_token_s = 0;
};

/// A model-on-hardware profile loaded from configs/profiles/*.yaml.
/// Interpolation (documented in each profile file too):
///  * S_kv: piecewise linear through the points; linear extrapolation with the
///    first/last segment's slope outside them (S_kv(0) = the linear-state size).
///  * T_prefill: piecewise linear through the points; below the first point the
///    first segment extended (never below first·l/l_first); above the last point
///    T(l) = a·l + b·l² through the last two points (super-linear attention
///    growth), or the last segment extended if that fit is not super-linear.
///  * Φ_kv(l) = S_kv(l)·8 / T_prefill(l) / 1e9 (MiB = 2^20 bytes, Gbps = 1e9 bit/s).
///    Phi-only profiles interpolate the published points linearly, clamped.
struct profile {
  std::string name, model, hardware, source;
  uint32_t gpus = 0;
  uint32_t layers = 0;               ///< layer count used to cut chunks (0 for phi-only)
  uint32_t linear_per_full = 0;      ///< layer pattern: this many linear, then one full
  std::vector<profile_point> points; ///< empty for phi-only profiles
  std::vector<phi_point> phi;        ///< published Φ_kv for phi-only profiles
  std::optional<decode_model> decode;

  bool has_timing() const { return !points.empty(); }
  /// S_kv(l) in bytes (requires has_timing()).
  double kv_bytes(uint64_t tokens) const;
  /// S_kv's knots (tokens, bytes): kv_bytes(l) == max(0, interpolate(kv_knots(), l)) bit
  /// for bit, for callers that evaluate it per token and keep the knots.
  std::vector<std::pair<double, double>> kv_knots() const;
  /// T_prefill(l) in seconds (requires has_timing()).
  double prefill_seconds(uint64_t tokens) const;
  /// Decode step seconds; requires `decode`.
  double decode_seconds(uint32_t batch, uint64_t context) const;
  /// BS_max: the largest batch meeting the decode SLO at mean context `context`.
  uint32_t max_batch(uint64_t context) const;
  /// Φ_kv(l) in Gbit/s.
  double phi_gbps(uint64_t tokens) const;
};

/// Linear interpolation through (x, y) knots sorted by x, extended with the end
/// segments' slopes; exact at the knots (measured points are reproduced bit for bit).
double interpolate(const std::vector<std::pair<double, double>>& xy, double x);

/// Parse a profile from YAML text; `source` names the file in error messages.
/// Validates every key (errors name it) and monotonicity of the points.
result<profile> parse_profile(const std::string& yaml_text, const std::string& source);
/// Load and parse a profile file.
result<profile> load_profile(const std::string& path);

} // namespace prfaas::engine

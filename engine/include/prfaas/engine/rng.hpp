#pragma once

#include <cstdint>

namespace prfaas::engine {

/// SplitMix64 finaliser: a bijective 64-bit mix. Used to derive seeds and as a
/// counter-based generator (mix64(seed + k * golden)).
constexpr uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// xoshiro256** seeded through SplitMix64. Deterministic across platforms; the
/// only RNG the engine library uses. Always constructed from an explicit seed.
class xoshiro256 {
public:
  explicit xoshiro256(uint64_t seed) noexcept {
    uint64_t x = seed;
    for (auto& w : s_) { // SplitMix64 stream: state x, outputs mix64(x), x += golden
      w = mix64(x);
      x += 0x9e3779b97f4a7c15ULL;
    }
  }

  uint64_t next() noexcept {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 24 bits of precision (exactly representable as float).
  float uniform_float() noexcept { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

  /// Uniform in [0, 1) with 53 bits of precision.
  double uniform_double() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n); n > 0. Slight modulo bias is irrelevant here.
  uint64_t below(uint64_t n) noexcept { return next() % n; }

private:
  static constexpr uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

} // namespace prfaas::engine

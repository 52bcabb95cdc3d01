#pragma once

#include "prfaas/engine/types.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace prfaas::engine {

/// Cuts a token sequence into fixed-size blocks and gives each full block a chained id:
///
///   h[-1] = seed
///   h[i]  = XXH3_64bits_withSeed(bytes of tokens[i·B, (i+1)·B), B·4, h[i-1])
///
/// where each token is its 32-bit two's-complement value in little-endian byte order
/// (the in-memory layout on the little-endian hosts we support — hashed in place,
/// no copy). Seeding block i's hash with h[i-1] makes h[i] depend on the whole prefix,
/// so equal ids mean equal prefixes (up to 64-bit collisions). Only full blocks get
/// ids: a trailing partial block is never cached and has none.
///
/// Trace replay does not hash: the trace's `hash_ids` are used as block ids directly.
class block_hasher {
public:
  static constexpr uint64_t default_seed = 0x7072666161732d31ULL; ///< "prfaas-1"

  /// Throws std::invalid_argument if block_tokens == 0 (a configuration error).
  explicit block_hasher(uint32_t block_tokens, uint64_t seed = default_seed);

  uint32_t block_tokens() const noexcept { return block_tokens_; }
  uint64_t seed() const noexcept { return seed_; }

  /// Ids of the full blocks of `tokens` (tokens.size() / block_tokens of them).
  std::vector<block_id> hash(std::span<const token> tokens) const;
  /// Same, writing into `out` (resized); avoids allocation in hot loops.
  void hash_into(std::span<const token> tokens, std::vector<block_id>& out) const;
  /// Id of one block given its parent's id (seed for the first block).
  block_id hash_block(block_id parent, std::span<const token> block) const noexcept;

private:
  uint32_t block_tokens_;
  uint64_t seed_;
};

} // namespace prfaas::engine

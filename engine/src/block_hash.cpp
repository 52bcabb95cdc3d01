#include "prfaas/engine/block_hash.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <stdexcept>

namespace prfaas::engine {

static_assert(std::endian::native == std::endian::little && sizeof(token) == 4,
              "block ids hash tokens as little-endian 32-bit integers in place");

block_hasher::block_hasher(uint32_t block_tokens, uint64_t seed)
    : block_tokens_(block_tokens), seed_(seed) {
  if (block_tokens == 0)
    throw std::invalid_argument("block_hasher: block_tokens must be > 0");
}

block_id block_hasher::hash_block(block_id parent, std::span<const token> block) const noexcept {
  return XXH3_64bits_withSeed(block.data(), block.size_bytes(), parent);
}

void block_hasher::hash_into(std::span<const token> tokens, std::vector<block_id>& out) const {
  const size_t n = tokens.size() / block_tokens_;
  out.resize(n);
  const size_t bytes = size_t{block_tokens_} * sizeof(token);
  const token* p = tokens.data();
  uint64_t h = seed_;
  for (size_t i = 0; i < n; ++i, p += block_tokens_) {
    h = XXH3_64bits_withSeed(p, bytes, h);
    out[i] = h;
  }
}

std::vector<block_id> block_hasher::hash(std::span<const token> tokens) const {
  std::vector<block_id> out;
  hash_into(tokens, out);
  return out;
}

} // namespace prfaas::engine

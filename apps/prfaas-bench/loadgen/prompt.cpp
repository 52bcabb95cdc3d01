#include "loadgen/prompt.hpp"

#include <algorithm>

namespace prfaas::loadgen {

namespace {

/// 64 symbols, so each takes 6 bits of a splitmix64 word.
constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";
static_assert(sizeof(alphabet) - 1 == 64);

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void append_random(std::string& out, uint64_t seed, size_t length) {
  uint64_t state = seed;
  size_t at = out.size();
  out.resize(at + length); // written in place: this makes every simulated prompt
  while (length > 0) {
    uint64_t word = splitmix64(state);
    for (int i = 0; i < 10 && length > 0; ++i, --length, word >>= 6)
      out[at++] = alphabet[word & 63];
  }
}

// Separate seed domains, so block text, fill text and synthetic prompts never coincide
// by construction of their seeds.
constexpr uint64_t block_domain = 0x6d6f6f6e63616b65ULL; // "mooncake"
constexpr uint64_t fill_domain = 0x66696c6c626c6f63ULL;  // "fillbloc"

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

} // namespace

std::string random_text(uint64_t seed, size_t length) {
  std::string out;
  out.reserve(length);
  append_random(out, seed, length);
  return out;
}

std::string block_text(uint64_t hash_id, size_t length) {
  return random_text(mix(block_domain, hash_id), length);
}

std::string block_prompt(const std::vector<uint64_t>& hash_ids, size_t input_tokens,
                         size_t block_tokens, uint64_t fill_seed) {
  std::string out;
  out.reserve(input_tokens);
  block_tokens = std::max<size_t>(block_tokens, 1);
  for (size_t i = 0; out.size() < input_tokens; ++i) {
    size_t n = std::min(block_tokens, input_tokens - out.size());
    uint64_t seed =
        i < hash_ids.size() ? mix(block_domain, hash_ids[i]) : mix(fill_domain, mix(fill_seed, i));
    append_random(out, seed, n);
  }
  return out;
}

} // namespace prfaas::loadgen

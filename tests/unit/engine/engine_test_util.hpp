#pragma once
// Helpers shared by the engine tests: seeded prompts and engine construction.

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/reference_engine.hpp"
#include "prfaas/engine/rng.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

namespace prfaas::engine::test {

inline std::unique_ptr<reference_engine> make_reference(reference_config c = {}) {
  auto e = reference_engine::create(c);
  REQUIRE(e.ok());
  return std::move(e).value();
}

/// A random prompt of `len` bytes: alternately random bytes and UTF-8 text-like
/// runs (multi-byte sequences included), so any byte value occurs.
inline std::vector<token> random_prompt(xoshiro256& rng, size_t len) {
  static const std::string words[] = {"the ",   "KVCache ", "préfill ", "数据中心 ",
                                      "λ=0.5 ", "\n",       "🙂 ",    "decode "};
  std::string s;
  while (s.size() < len) {
    if (rng.below(3) == 0)
      s.push_back(static_cast<char>(rng.below(256)));
    else
      s += words[rng.below(8)];
  }
  s.resize(len);
  return reference_engine::tokenize(s);
}

/// Prompt length in [1, max]: log-uniform so short and long prompts both occur.
inline size_t random_length(xoshiro256& rng, size_t max) {
  const double u = rng.uniform_double();
  const auto n = static_cast<size_t>(std::exp(u * std::log(static_cast<double>(max))));
  return std::clamp<size_t>(n, 1, max);
}

/// Serialize a chunk list into one byte stream (what goes over the wire).
inline std::vector<std::byte> to_wire(const std::vector<kv_chunk>& chunks) {
  std::vector<std::byte> out;
  for (const auto& c : chunks)
    serialize_append(c, out);
  return out;
}

inline std::vector<token> decode_n(engine& e, seq_id id, int n) {
  std::vector<token> out;
  const seq_id batch[1] = {id};
  for (int i = 0; i < n; ++i) {
    auto r = e.decode_step(batch);
    REQUIRE(r.ok());
    out.push_back(r.value()[0]);
  }
  return out;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace prfaas::engine::test

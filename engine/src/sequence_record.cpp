#include "prfaas/engine/sequence_record.hpp"

#include <cmath>
#include <cstring>

namespace prfaas::engine {

// Meta payload, little-endian:
//   0 u32 n_tokens  4 u32 prompt_tokens  8 i32 pending  12 u32 sampled
//  16 f32 temperature  20 u32 reserved (0)  24 u64 seed  32 i32 tokens[n_tokens]
namespace {
constexpr size_t fixed_bytes = 32;

template <class T>
void put(std::byte* out, size_t off, T v) { std::memcpy(out + off, &v, sizeof(T)); }
template <class T>
T get(const std::byte* in, size_t off) {
  T v;
  std::memcpy(&v, in + off, sizeof(T));
  return v;
}
} // namespace

kv_chunk make_meta_chunk(const model_info& info, const sequence_record& r) {
  std::vector<std::byte> payload(fixed_bytes + 4 * r.tokens.size());
  std::byte* p = payload.data();
  put<uint32_t>(p, 0, static_cast<uint32_t>(r.tokens.size()));
  put<uint32_t>(p, 4, r.prompt_tokens);
  put<int32_t>(p, 8, r.pending);
  put<uint32_t>(p, 12, r.sampled);
  put<float>(p, 16, r.sampling.temperature);
  put<uint32_t>(p, 20, 0);
  put<uint64_t>(p, 24, r.sampling.seed);
  if (!r.tokens.empty())
    std::memcpy(p + fixed_bytes, r.tokens.data(), 4 * r.tokens.size());
  chunk_header h;
  h.kind = layer_kind::meta;
  h.model_fingerprint = info.fingerprint;
  h.layer = info.n_layers();
  h.n_layers = info.n_layers();
  h.token_begin = 0;
  h.token_end = static_cast<uint32_t>(r.tokens.size());
  h.total_tokens = h.token_end;
  return make_chunk(h, std::move(payload));
}

result<sequence_record> parse_meta_payload(std::span<const std::byte> payload,
                                           const model_info& info, const std::string& label) {
  if (payload.size() < fixed_bytes)
    return make_error(label + ": meta payload too short (" + std::to_string(payload.size()) +
                      " bytes)");
  const std::byte* p = payload.data();
  const auto n = get<uint32_t>(p, 0);
  if ((payload.size() - fixed_bytes) / 4 != n || (payload.size() - fixed_bytes) % 4 != 0)
    return make_error(label + ": meta payload size does not match its token count " +
                      std::to_string(n));
  sequence_record r;
  r.prompt_tokens = get<uint32_t>(p, 4);
  r.pending = get<int32_t>(p, 8);
  r.sampled = get<uint32_t>(p, 12);
  r.sampling.temperature = get<float>(p, 16);
  r.sampling.seed = get<uint64_t>(p, 24);
  if (r.prompt_tokens == 0 || r.prompt_tokens > n)
    return make_error(label + ": prompt length " + std::to_string(r.prompt_tokens) +
                      " inconsistent with " + std::to_string(n) + " tokens");
  if (!std::isfinite(r.sampling.temperature) || r.sampling.temperature < 0.0f)
    return make_error(label + ": invalid sampling temperature");
  const auto vocab = static_cast<int64_t>(info.vocab_size);
  if (r.pending < 0 || r.pending >= vocab)
    return make_error(label + ": pending token " + std::to_string(r.pending) + " outside vocab");
  r.tokens.resize(n);
  if (n != 0)
    std::memcpy(r.tokens.data(), p + fixed_bytes, 4 * size_t{n});
  for (uint32_t i = 0; i < n; ++i)
    if (r.tokens[i] < 0 || r.tokens[i] >= vocab)
      return make_error(label + ": token " + std::to_string(i) + " = " +
                        std::to_string(r.tokens[i]) + " outside vocab");
  return r;
}

} // namespace prfaas::engine

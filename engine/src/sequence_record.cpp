#include "prfaas/engine/sequence_record.hpp"

#include <cmath>
#include <cstring>

namespace prfaas::engine {

// Meta payload, little-endian:
//   0 u32 n_tokens  4 u32 prompt_tokens  8 i32 pending  12 u32 sampled
//  16 f32 temperature  20 u32 ext_bytes  24 u64 seed  32 i32 tokens[n_tokens]
//  then ext_bytes of extension (absent, ext_bytes == 0, when it would say nothing):
//   0 u32 ext_version (1)  4 f32 top_p  8 f32 presence_penalty  12 f32 frequency_penalty
//  16 i32 logprobs  20 u32 first_index  24 u32 n_bias  28 {i32 token, f32 bias}[n_bias]
//   then u32 identity_bytes and the identity bytes.
// A record without extension is the format's first version, byte for byte.
namespace {
constexpr size_t fixed_bytes = 32;
constexpr size_t ext_fixed_bytes = 28;
constexpr uint32_t ext_version = 1;
constexpr uint32_t max_bias = 1u << 20;

template <class T> void put(std::byte* out, size_t off, T v) {
  std::memcpy(out + off, &v, sizeof(T));
}
template <class T> T get(const std::byte* in, size_t off) {
  T v;
  std::memcpy(&v, in + off, sizeof(T));
  return v;
}

bool needs_extension(const sequence_record& r) {
  const auto& s = r.sampling;
  return !s.plain() || s.logprobs >= 0 || s.first_index != 0 || !r.identity.empty();
}

std::vector<std::byte> extension_of(const sequence_record& r) {
  if (!needs_extension(r))
    return {};
  const auto& s = r.sampling;
  std::vector<std::byte> ext(ext_fixed_bytes + 8 * s.logit_bias.size() + 4 + r.identity.size());
  std::byte* p = ext.data();
  put<uint32_t>(p, 0, ext_version);
  put<float>(p, 4, s.top_p);
  put<float>(p, 8, s.presence_penalty);
  put<float>(p, 12, s.frequency_penalty);
  put<int32_t>(p, 16, s.logprobs);
  put<uint32_t>(p, 20, s.first_index);
  put<uint32_t>(p, 24, static_cast<uint32_t>(s.logit_bias.size()));
  size_t off = ext_fixed_bytes;
  for (auto [t, b] : s.logit_bias) {
    put<int32_t>(p, off, t);
    put<float>(p, off + 4, b);
    off += 8;
  }
  put<uint32_t>(p, off, static_cast<uint32_t>(r.identity.size()));
  if (!r.identity.empty())
    std::memcpy(p + off + 4, r.identity.data(), r.identity.size());
  return ext;
}

/// Reads the extension into `r`; an error text naming the field, or empty.
std::string parse_extension(std::span<const std::byte> ext, sequence_record& r, int64_t vocab) {
  if (ext.size() < ext_fixed_bytes + 4)
    return "meta extension too short (" + std::to_string(ext.size()) + " bytes)";
  const std::byte* p = ext.data();
  if (auto v = get<uint32_t>(p, 0); v != ext_version)
    return "meta extension version " + std::to_string(v) + " unsupported (this build reads " +
           std::to_string(ext_version) + ")";
  auto& s = r.sampling;
  s.top_p = get<float>(p, 4);
  s.presence_penalty = get<float>(p, 8);
  s.frequency_penalty = get<float>(p, 12);
  s.logprobs = get<int32_t>(p, 16);
  s.first_index = get<uint32_t>(p, 20);
  const auto n_bias = get<uint32_t>(p, 24);
  if (!std::isfinite(s.top_p) || s.top_p <= 0.0f || s.top_p > 1.0f)
    return "invalid top_p";
  if (!std::isfinite(s.presence_penalty) || !std::isfinite(s.frequency_penalty) ||
      std::fabs(s.presence_penalty) > 2.0f || std::fabs(s.frequency_penalty) > 2.0f)
    return "invalid penalties";
  if (s.logprobs < -1 || s.logprobs > 1024)
    return "invalid logprobs count " + std::to_string(s.logprobs);
  if (n_bias > max_bias || ext.size() < ext_fixed_bytes + 8ull * n_bias + 4)
    return "meta extension too short for " + std::to_string(n_bias) + " logit biases";
  size_t off = ext_fixed_bytes;
  for (uint32_t i = 0; i < n_bias; ++i, off += 8) {
    const auto t = get<int32_t>(p, off);
    const auto b = get<float>(p, off + 4);
    if (t < 0 || t >= vocab || !std::isfinite(b) || std::fabs(b) > 100.0f)
      return "logit bias " + std::to_string(i) + " invalid";
    s.logit_bias.emplace_back(t, b);
  }
  const auto id_bytes = get<uint32_t>(p, off);
  if (ext.size() != off + 4 + id_bytes)
    return "meta extension size does not match its identity length " + std::to_string(id_bytes);
  r.identity.assign(ext.begin() + static_cast<ptrdiff_t>(off + 4), ext.end());
  return {};
}

} // namespace

result<std::span<const std::byte>> meta_identity(std::span<const std::byte> payload) {
  if (payload.size() < fixed_bytes)
    return make_error("meta payload too short (" + std::to_string(payload.size()) + " bytes)");
  const auto n = get<uint32_t>(payload.data(), 0);
  const auto ext_bytes = get<uint32_t>(payload.data(), 20);
  if (ext_bytes == 0)
    return std::span<const std::byte>{};
  if (payload.size() - fixed_bytes != 4ull * n + ext_bytes || ext_bytes < ext_fixed_bytes + 4)
    return make_error("meta payload size does not match its token count " + std::to_string(n));
  const auto ext = payload.subspan(fixed_bytes + 4 * size_t{n});
  const auto n_bias = get<uint32_t>(ext.data(), 24);
  const uint64_t off = ext_fixed_bytes + 8ull * n_bias;
  if (n_bias > max_bias || ext.size() < off + 4 ||
      ext.size() != off + 4 + get<uint32_t>(ext.data(), off))
    return make_error("meta extension size does not match its contents");
  return ext.subspan(static_cast<size_t>(off + 4));
}

kv_chunk make_meta_chunk(const model_info& info, const sequence_record& r) {
  const auto ext = extension_of(r);
  std::vector<std::byte> payload(fixed_bytes + 4 * r.tokens.size() + ext.size());
  std::byte* p = payload.data();
  put<uint32_t>(p, 0, static_cast<uint32_t>(r.tokens.size()));
  put<uint32_t>(p, 4, r.prompt_tokens);
  put<int32_t>(p, 8, r.pending);
  put<uint32_t>(p, 12, r.sampled);
  put<float>(p, 16, r.sampling.temperature);
  put<uint32_t>(p, 20, static_cast<uint32_t>(ext.size()));
  put<uint64_t>(p, 24, r.sampling.seed);
  if (!r.tokens.empty())
    std::memcpy(p + fixed_bytes, r.tokens.data(), 4 * r.tokens.size());
  if (!ext.empty())
    std::memcpy(p + fixed_bytes + 4 * r.tokens.size(), ext.data(), ext.size());
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
  const auto ext_bytes = get<uint32_t>(p, 20);
  const size_t body = payload.size() - fixed_bytes;
  if (body < ext_bytes || (body - ext_bytes) % 4 != 0 || (body - ext_bytes) / 4 != n)
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
  if (ext_bytes != 0)
    if (auto e = parse_extension(payload.subspan(fixed_bytes + 4 * size_t{n}), r, vocab);
        !e.empty())
      return make_error(label + ": " + e);
  return r;
}

} // namespace prfaas::engine

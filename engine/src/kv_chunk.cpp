#include "prfaas/engine/kv_chunk.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "prfaas/hash/xxh3.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

static_assert(std::endian::native == std::endian::little,
              "prfaas::engine assumes a little-endian host (chunk payloads are raw floats)");

namespace prfaas::engine {

// Wire layout of the 64-byte header (all little-endian):
//   0 u32 magic        4 u16 version      6 u8 kind      7 u8 reserved (0)
//   8 u64 fingerprint 16 u32 layer       20 u32 n_layers
//  24 u32 token_begin 28 u32 token_end   32 u32 total_tokens 36 u32 sequence_no
//  40 u64 payload_bytes 48 u64 payload_xxh3 56 u64 header_xxh3 (of bytes 0..55)
namespace {

template <class T> void put(std::byte* out, size_t off, T v) {
  std::memcpy(out + off, &v, sizeof(T));
}

template <class T> T get(const std::byte* in, size_t off) {
  T v;
  std::memcpy(&v, in + off, sizeof(T));
  return v;
}

constexpr size_t header_checked_bytes = 56;

} // namespace

uint64_t checksum(std::span<const std::byte> bytes) noexcept {
  return hash::xxh3_64(bytes.data(), bytes.size());
}

kv_chunk make_chunk(chunk_header header, std::vector<std::byte> payload) {
  header.payload_bytes = payload.size();
  header.payload_xxh3 = checksum(payload);
  return kv_chunk{header, std::move(payload)};
}

std::string chunk_label(size_t index, const chunk_header& header) {
  std::string s = "kv chunk " + std::to_string(index);
  if (header.kind == layer_kind::meta)
    s += " (meta)";
  else
    s += " (layer " + std::to_string(header.layer) + ")";
  return s;
}

void serialize_header(const chunk_header& h, std::span<std::byte, chunk_header::wire_size> out) {
  std::byte* p = out.data();
  std::memset(p, 0, chunk_header::wire_size);
  put<uint32_t>(p, 0, chunk_header::magic_value);
  put<uint16_t>(p, 4, h.version);
  put<uint8_t>(p, 6, static_cast<uint8_t>(h.kind));
  put<uint64_t>(p, 8, h.model_fingerprint);
  put<uint32_t>(p, 16, h.layer);
  put<uint32_t>(p, 20, h.n_layers);
  put<uint32_t>(p, 24, h.token_begin);
  put<uint32_t>(p, 28, h.token_end);
  put<uint32_t>(p, 32, h.total_tokens);
  put<uint32_t>(p, 36, h.sequence_no);
  put<uint64_t>(p, 40, h.payload_bytes);
  put<uint64_t>(p, 48, h.payload_xxh3);
  put<uint64_t>(p, 56, XXH3_64bits(p, header_checked_bytes));
}

size_t serialized_size(const kv_chunk& chunk) noexcept {
  return chunk_header::wire_size + chunk.payload.size();
}

void serialize_into(const kv_chunk& chunk, std::span<std::byte> out) {
  if (out.size() != serialized_size(chunk))
    throw std::length_error("serialize_into: " + std::to_string(out.size()) + " bytes for a " +
                            std::to_string(serialized_size(chunk)) + "-byte chunk");
  chunk_header h = chunk.header;
  h.payload_bytes = chunk.payload.size(); // the wire always describes the real payload
  serialize_header(h, out.first<chunk_header::wire_size>());
  if (!chunk.payload.empty())
    std::memcpy(out.data() + chunk_header::wire_size, chunk.payload.data(), chunk.payload.size());
}

void serialize_append(const kv_chunk& chunk, std::vector<std::byte>& out) {
  const size_t at = out.size();
  out.resize(at + serialized_size(chunk));
  serialize_into(chunk, std::span<std::byte>(out).subspan(at));
}

std::vector<std::byte> serialize(const kv_chunk& chunk) {
  std::vector<std::byte> out;
  serialize_append(chunk, out);
  return out;
}

result<chunk_header> parse_header(std::span<const std::byte> bytes, size_t index) {
  // Labels are built only for an error: this runs for every chunk received.
  auto where = [index] { return "kv chunk " + std::to_string(index); };
  if (bytes.size() < chunk_header::wire_size)
    return make_error(where() + ": truncated header (" + std::to_string(bytes.size()) + " of " +
                      std::to_string(chunk_header::wire_size) + " bytes)");
  const std::byte* p = bytes.data();
  if (get<uint32_t>(p, 0) != chunk_header::magic_value)
    return make_error(where() + ": bad magic (not a prfaas kv chunk)");
  const auto version = get<uint16_t>(p, 4);
  if (version != chunk_header::current_version)
    return make_error(where() + ": unsupported format version " + std::to_string(version) +
                      " (expected " + std::to_string(chunk_header::current_version) + ")");
  if (get<uint64_t>(p, 56) != XXH3_64bits(p, header_checked_bytes))
    return make_error(where() + ": header checksum mismatch (corrupted header)");
  const auto kind = get<uint8_t>(p, 6);
  if (kind < 1 || kind > 3 || get<uint8_t>(p, 7) != 0)
    return make_error(where() + ": invalid layer kind " + std::to_string(kind));
  chunk_header h;
  h.version = version;
  h.kind = static_cast<layer_kind>(kind);
  h.model_fingerprint = get<uint64_t>(p, 8);
  h.layer = get<uint32_t>(p, 16);
  h.n_layers = get<uint32_t>(p, 20);
  h.token_begin = get<uint32_t>(p, 24);
  h.token_end = get<uint32_t>(p, 28);
  h.total_tokens = get<uint32_t>(p, 32);
  h.sequence_no = get<uint32_t>(p, 36);
  h.payload_bytes = get<uint64_t>(p, 40);
  h.payload_xxh3 = get<uint64_t>(p, 48);
  auto label = [&] { return chunk_label(index, h); };
  if (h.token_begin > h.token_end || h.token_end > h.total_tokens)
    return make_error(label() + ": invalid token range [" + std::to_string(h.token_begin) + ", " +
                      std::to_string(h.token_end) + ") of " + std::to_string(h.total_tokens));
  if (h.kind != layer_kind::meta && h.layer >= h.n_layers)
    return make_error(label() + ": layer index out of range (model has " +
                      std::to_string(h.n_layers) + " layers)");
  return h;
}

namespace {

/// Parses and verifies the chunk at the start of `bytes` without copying it: its header
/// and where its payload lies in `bytes`. Sets `consumed`.
result<chunk_header> parse_in_place(std::span<const std::byte> bytes, size_t index,
                                    size_t& consumed, std::span<const std::byte>& payload) {
  auto h = parse_header(bytes, index);
  if (!h)
    return h.err();
  auto label = [&] { return chunk_label(index, *h); };
  const size_t available = bytes.size() - chunk_header::wire_size;
  if (h->payload_bytes > available)
    return make_error(label() + ": truncated payload (" + std::to_string(available) + " of " +
                      std::to_string(h->payload_bytes) + " bytes)");
  payload = bytes.subspan(chunk_header::wire_size, static_cast<size_t>(h->payload_bytes));
  if (checksum(payload) != h->payload_xxh3)
    return make_error(label() + ": checksum mismatch (payload corrupted)");
  consumed = chunk_header::wire_size + payload.size();
  return h;
}

/// Parses the chunk at the start of `bytes`; sets `consumed`.
result<kv_chunk> parse_one(std::span<const std::byte> bytes, size_t index, size_t& consumed) {
  std::span<const std::byte> payload;
  auto h = parse_in_place(bytes, index, consumed, payload);
  if (!h)
    return h.err();
  return kv_chunk{*h, std::vector<std::byte>(payload.begin(), payload.end())};
}

} // namespace

result<kv_chunk> parse_chunk(std::span<const std::byte> bytes, size_t index) {
  size_t consumed = 0;
  auto c = parse_one(bytes, index, consumed);
  if (c && consumed != bytes.size())
    return make_error(chunk_label(index, c->header) + ": " +
                      std::to_string(bytes.size() - consumed) + " trailing bytes after payload");
  return c;
}

result<void> parse_stream_into(std::span<const std::byte> bytes, std::vector<kv_chunk>& out) {
  size_t off = 0;
  while (off < bytes.size()) {
    size_t consumed = 0;
    auto c = parse_one(bytes.subspan(off), out.size(), consumed);
    if (!c)
      return c.err();
    out.push_back(std::move(c).value());
    off += consumed;
  }
  return {};
}

result<size_t> parse_stream_over(std::span<const std::byte> bytes, std::vector<kv_chunk>& out,
                                 size_t at) {
  size_t off = 0;
  while (off < bytes.size()) {
    size_t consumed = 0;
    std::span<const std::byte> payload;
    auto h = parse_in_place(bytes.subspan(off), at, consumed, payload);
    if (!h)
      return h.err();
    if (at >= out.size())
      out.resize(at + 1);
    out[at].header = *h;
    out[at].payload.assign(payload.begin(), payload.end()); // keeps its capacity
    ++at;
    off += consumed;
  }
  return at;
}

result<std::vector<kv_chunk>> parse_stream(std::span<const std::byte> bytes) {
  std::vector<kv_chunk> out;
  if (auto r = parse_stream_into(bytes, out); !r)
    return r.err();
  return out;
}

} // namespace prfaas::engine

#pragma once

#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace prfaas::engine {

/// Wire header of one KV chunk: 64 bytes, little-endian, fixed layout (see
/// kv_chunk.cpp for offsets). A chunk is either
///  * a full-attention layer's KV for tokens [token_begin, token_end),
///  * a linear-attention layer's state after exactly token_end tokens (token_begin == 0),
///  * the sequence record (kind meta, layer == n_layers).
/// `total_tokens` is the length of the sequence the chunk was cut from.
struct chunk_header {
  static constexpr uint32_t magic_value = 0x43564b50; ///< "PKVC" read as little-endian u32
  static constexpr uint16_t current_version = 1;
  static constexpr size_t wire_size = 64;

  uint16_t version = current_version;
  layer_kind kind = layer_kind::full;
  uint64_t model_fingerprint = 0;
  uint32_t layer = 0;        ///< layer index; n_layers for the meta chunk
  uint32_t n_layers = 0;     ///< layers of the model that produced it
  uint32_t token_begin = 0;  ///< first token covered (full); 0 otherwise
  uint32_t token_end = 0;    ///< one past the last token covered / state length
  uint32_t total_tokens = 0; ///< sequence length at export
  uint32_t sequence_no = 0;  ///< position in the exporting stream (informational)
  uint64_t payload_bytes = 0;
  uint64_t payload_xxh3 = 0; ///< XXH3-64 (seed 0) of the payload bytes
};

/// One chunk: header plus payload. Produced by engine export, consumed by import.
struct kv_chunk {
  chunk_header header;
  std::vector<std::byte> payload;
};

/// XXH3-64 (seed 0) of a byte range.
uint64_t checksum(std::span<const std::byte> bytes) noexcept;

/// Build a chunk, filling payload_bytes and payload_xxh3 from the payload.
kv_chunk make_chunk(chunk_header header, std::vector<std::byte> payload);

/// Header + payload as one contiguous wire buffer (header_xxh3 included).
std::vector<std::byte> serialize(const kv_chunk& chunk);
/// Append the serialized chunk to `out` (for building a stream of chunks).
void serialize_append(const kv_chunk& chunk, std::vector<std::byte>& out);
/// Bytes serialize() produces for `chunk`.
size_t serialized_size(const kv_chunk& chunk) noexcept;
/// Serialize into exactly serialized_size(chunk) bytes (e.g. a send pool buffer);
/// throws std::length_error for any other size.
void serialize_into(const kv_chunk& chunk, std::span<std::byte> out);
/// Only the 64-byte header (for streaming the payload separately).
void serialize_header(const chunk_header& header,
                      std::span<std::byte, chunk_header::wire_size> out);

/// Parse and verify a header: size, magic, version, header checksum, kind, ranges.
/// `index` only labels error messages ("kv chunk <index>").
result<chunk_header> parse_header(std::span<const std::byte> bytes, size_t index = 0);

/// Parse exactly one chunk occupying all of `bytes`; rejects truncation, trailing
/// bytes and a payload checksum mismatch.
result<kv_chunk> parse_chunk(std::span<const std::byte> bytes, size_t index = 0);

/// Parse a concatenation of serialized chunks.
result<std::vector<kv_chunk>> parse_stream(std::span<const std::byte> bytes);
/// Parse a concatenation of serialized chunks onto the end of `out`; errors number
/// the chunks from out.size() on, so a transfer of several messages reads as one.
result<void> parse_stream_into(std::span<const std::byte> bytes, std::vector<kv_chunk>& out);
/// As parse_stream_into, but the chunks go to out[at], out[at + 1], ... reusing the
/// memory those elements' payloads already hold (out grows as needed; elements past
/// the returned count are left as they were). A receiver that keeps `out` from one
/// state to the next copies each payload into memory it has already touched, instead of
/// faulting in a fresh allocation the size of the state every time.
result<size_t> parse_stream_over(std::span<const std::byte> bytes, std::vector<kv_chunk>& out,
                                 size_t at);

/// "kv chunk 3 (layer 2)" — the prefix used by every chunk error message.
std::string chunk_label(size_t index, const chunk_header& header);

} // namespace prfaas::engine

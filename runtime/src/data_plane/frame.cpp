#include "prfaas/runtime/data_plane/frame.hpp"

#include <bit>
#include <cstring>

#include "prfaas/hash/xxh3.hpp"

namespace prfaas::data_wire {

static_assert(std::endian::native == std::endian::little,
              "the data-plane header is written with memcpy: little-endian hosts only");

namespace {

template <class T> void put(std::string& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T> T get(const std::byte* in, size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof(T));
  return v;
}

} // namespace

const char* to_string(decode_error e) {
  switch (e) {
  case decode_error::none:
    return "none";
  case decode_error::short_header:
    return "short_header";
  case decode_error::bad_magic:
    return "bad_magic";
  case decode_error::bad_version:
    return "bad_version";
  case decode_error::bad_kind:
    return "bad_kind";
  case decode_error::bad_names:
    return "bad_names";
  }
  return "?";
}

std::string encode(const header& h) {
  std::string out(fixed_header_bytes + h.source.size() + h.sink.size(), '\0');
  put<uint32_t>(out, 0, magic);
  put<uint8_t>(out, 4, version);
  put<uint8_t>(out, 5, static_cast<uint8_t>(h.k));
  put<uint16_t>(out, 6, h.flags);
  put<uint64_t>(out, 8, h.id);
  put<uint32_t>(out, 16, h.index);
  put<uint32_t>(out, 20, h.total);
  put<uint64_t>(out, 24, h.checksum);
  put<uint32_t>(out, 32, h.credit);
  put<uint32_t>(out, 36, h.seq);
  put<uint16_t>(out, 40, static_cast<uint16_t>(h.source.size()));
  put<uint16_t>(out, 42, static_cast<uint16_t>(h.sink.size()));
  put<uint64_t>(out, 44, h.incarnation);
  std::memcpy(out.data() + fixed_header_bytes, h.source.data(), h.source.size());
  std::memcpy(out.data() + fixed_header_bytes + h.source.size(), h.sink.data(), h.sink.size());
  return out;
}

std::optional<header> decode(const std::byte* in, size_t size, decode_error& err) {
  err = decode_error::none;
  if (in == nullptr || size < fixed_header_bytes) {
    err = decode_error::short_header;
    return std::nullopt;
  }
  if (get<uint32_t>(in, 0) != magic) {
    err = decode_error::bad_magic;
    return std::nullopt;
  }
  if (get<uint8_t>(in, 4) != version) {
    err = decode_error::bad_version;
    return std::nullopt;
  }
  auto k = get<uint8_t>(in, 5);
  if (k < static_cast<uint8_t>(kind::open) || k > static_cast<uint8_t>(kind::credit)) {
    err = decode_error::bad_kind;
    return std::nullopt;
  }
  size_t source_len = get<uint16_t>(in, 40), sink_len = get<uint16_t>(in, 42);
  if (source_len > max_name_bytes || sink_len > max_name_bytes ||
      fixed_header_bytes + source_len + sink_len != size) {
    err = decode_error::bad_names;
    return std::nullopt;
  }
  header h;
  h.k = static_cast<kind>(k);
  h.flags = get<uint16_t>(in, 6);
  h.id = get<uint64_t>(in, 8);
  h.index = get<uint32_t>(in, 16);
  h.total = get<uint32_t>(in, 20);
  h.checksum = get<uint64_t>(in, 24);
  h.credit = get<uint32_t>(in, 32);
  h.seq = get<uint32_t>(in, 36);
  h.incarnation = get<uint64_t>(in, 44);
  auto* names = reinterpret_cast<const char*>(in) + fixed_header_bytes;
  h.source.assign(names, source_len);
  h.sink.assign(names + source_len, sink_len);
  return h;
}

uint64_t checksum(const std::byte* data, size_t size) {
  return hash::xxh3_64(data, size);
}

std::string encode_held(const std::vector<held_chunk>& held) {
  constexpr size_t entry = sizeof(uint32_t) + sizeof(uint64_t);
  std::string out(held.size() * entry, '\0');
  for (size_t i = 0; i < held.size(); ++i) {
    put<uint32_t>(out, i * entry, held[i].index);
    put<uint64_t>(out, i * entry + sizeof(uint32_t), held[i].checksum);
  }
  return out;
}

bool decode_held(const std::byte* bytes, size_t size, std::vector<held_chunk>& out) {
  constexpr size_t entry = sizeof(uint32_t) + sizeof(uint64_t);
  out.clear();
  if (size % entry != 0)
    return false;
  for (size_t at = 0; at < size; at += entry)
    out.push_back({get<uint32_t>(bytes, at), get<uint64_t>(bytes, at + sizeof(uint32_t))});
  return true;
}

} // namespace prfaas::data_wire

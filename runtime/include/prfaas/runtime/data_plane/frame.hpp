#pragma once

// The data plane's frame header: a small fixed little-endian struct followed by the
// source node and sink names. Every data-plane message is multipart
// [header, payload?]; the payload frame holds chunk bytes (CHUNK), the opaque meta
// (OPEN), the chunks the receiver already holds (ACK of an OPEN) or a reason (REFUSE).
//
//   offset size field
//        0    4 magic "PFDP" (0x50444650 little-endian)
//        4    1 version (2)
//        5    1 kind
//        6    2 flags
//        8    8 transfer id (chosen by the sender)
//       16    4 chunk index
//       20    4 total chunks (valid with flag_total)
//       24    8 xxh3-64 of the payload (CHUNK)
//       32    4 credit: the receiver's grant for the transfer: chunks with a lower
//                index may be sent (ACK, ACK of an OPEN, CREDIT); it only grows
//       36    4 seq: the sender's number for this transmission on its connection
//                (CHUNK), echoed by the ACK/NACK that answers it
//       40    2 length of the source node name
//       42    2 length of the sink name
//       44    8 the source node's incarnation (fencing: a receiver drops frames from
//                an incarnation older than one it heard, or one it declared down that
//                has not learned it yet; see peer_epochs.hpp)
//       52      source, sink (no terminators)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prfaas::data_wire {

inline constexpr uint32_t magic = 0x50444650; // "PFDP"
inline constexpr uint8_t version = 2;
inline constexpr size_t fixed_header_bytes = 52;
inline constexpr size_t max_name_bytes = 1024;

enum class kind : uint8_t {
  open = 1,  ///< sender → receiver: start (or resume) a transfer; payload = meta
  chunk = 2, ///< sender → receiver: one chunk; payload = its bytes
  ack = 3, ///< receiver → sender: chunk `index` arrived intact (or, with flag_open, OPEN accepted)
  nack = 4,   ///< receiver → sender: chunk `index` failed its checksum; re-send it
  done = 5,   ///< sender → receiver: no more chunks (flag_total); receiver → sender: delivered
  cancel = 6, ///< sender → receiver: forget the transfer
  refuse = 7, ///< receiver → sender: cannot take the transfer; payload = reason
  credit = 8, ///< receiver → sender: the grant grew (buffers came back); no payload
};

enum flag : uint16_t {
  flag_total = 1,    ///< `total` is valid
  flag_open = 2,     ///< an ACK that answers an OPEN; payload = held chunks
  flag_bulk = 4,     ///< with flag_open: the receiver takes chunks on TCP port `total` (bulk.cpp)
  flag_rerouted = 8, ///< ACK/NACK on another connection than the chunk's: `seq` is not its
};

struct header {
  kind k = kind::chunk;
  uint16_t flags = 0;
  uint64_t id = 0;
  uint32_t index = 0;
  uint32_t total = 0;
  uint64_t checksum = 0;
  uint32_t credit = 0;
  uint32_t seq = 0;
  uint64_t incarnation = 0; ///< of the source node
  std::string source;
  std::string sink;

  bool has_total() const { return (flags & flag_total) != 0; }
};

/// Why a frame could not be decoded.
enum class decode_error : uint8_t {
  none,
  short_header,
  bad_magic,
  bad_version,
  bad_kind,
  bad_names
};
const char* to_string(decode_error);

std::string encode(const header& h);
/// Parses `bytes`; on failure returns nullopt and sets `err`.
std::optional<header> decode(const std::byte* bytes, size_t size, decode_error& err);

/// xxh3-64 of a payload.
uint64_t checksum(const std::byte* data, size_t size);

/// A chunk the receiver already holds: its index and checksum (for resume).
struct held_chunk {
  uint32_t index = 0;
  uint64_t checksum = 0;
};
std::string encode_held(const std::vector<held_chunk>& held);
/// Returns false when `size` is not a whole number of entries.
bool decode_held(const std::byte* bytes, size_t size, std::vector<held_chunk>& out);

} // namespace prfaas::data_wire

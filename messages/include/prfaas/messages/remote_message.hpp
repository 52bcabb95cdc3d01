#pragma once

// What local actors see of cross-node traffic: an address, a protobuf payload and
// an optional zero-copy bulk frame. Actors never see sockets or envelopes.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <chrono>

namespace prfaas {

/// A `node/actor` address. Both parts are non-empty and contain no '/'.
struct address {
  std::string node;
  std::string actor;

  std::string to_string() const { return node + "/" + actor; }
  /// Parses "node/actor"; returns false on anything else.
  static bool parse(std::string_view text, address& out);
  friend bool operator==(const address&, const address&) = default;
};

/// Bytes that travel as their own frame, never copied by the transport.
/// Implementations own the memory (a vector, a ZeroMQ message, an mmap'd file).
class bulk_buffer {
public:
  virtual ~bulk_buffer() = default;
  virtual const std::byte* data() const noexcept = 0;
  virtual size_t size() const noexcept = 0;
  /// True when the bytes belong to a bounded pool that wants them back soon.
  virtual bool pooled() const noexcept { return false; }
};
using bulk_ptr = std::shared_ptr<const bulk_buffer>;

/// Wraps a byte string as a bulk buffer.
bulk_ptr make_bulk(std::string bytes);
/// Wraps a byte vector as a bulk buffer.
bulk_ptr make_bulk(std::vector<std::byte> bytes);
/// A copy of `size` bytes as a bulk buffer.
bulk_ptr copy_bulk(const std::byte* data, size_t size);

/// A message from or to another node's actor.
///  * one-way: `request_id == 0`;
///  * request: delivered with the sender's `request_id`; the handler's reply
///    (a remote_message, or a caf::error) travels back to the requester.
struct remote_message {
  address source;
  address destination;
  std::string type;    ///< protobuf full name of `payload`
  std::string payload; ///< serialized protobuf
  bulk_ptr bulk;       ///< optional zero-copy frame
  uint64_t request_id = 0;
  /// Local deadline on the actor clock (steady or virtual); default = none.
  std::chrono::steady_clock::time_point deadline{};
};

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::remote_message)

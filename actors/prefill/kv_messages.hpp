#pragma once

// The data-plane messages of one KV transfer, as a prefill produces its chunks.
//
// Chunks are concatenated (the receiver parses a stream of them), up to `group` per
// message and never past `cap` bytes (data_plane.max_chunk_bytes). A message is built
// in a send pool buffer (data_plane::send_pool()) when it fits one: reused memory, no
// allocation or page fault, pushed without a copy. When every buffer is in flight the
// producer waits up to `wait` for one — back-pressure from the link — and then builds
// the message in a vector instead, counted, rather than stall a prefill indefinitely.
// Once `stale()` says the transfer's work was given up (fencing), nothing more goes out.

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/runtime/data_plane.hpp"

namespace prfaas::serving {

class kv_messages {
public:
  kv_messages(data_plane& dp, uint64_t transfer_id, uint32_t group, uint64_t cap,
              std::chrono::milliseconds wait, std::function<bool()> stale = {});
  ~kv_messages() = default;
  kv_messages(const kv_messages&) = delete;
  kv_messages& operator=(const kv_messages&) = delete;

  /// Appends one chunk, pushing the message first if the chunk would not fit it, and
  /// after it once it holds `group` chunks.
  void add(const engine::kv_chunk& c);
  /// Pushes what is held (nothing when empty).
  void flush();
  /// The transfer's work was given up: nothing was pushed since (checked per message).
  bool stale() const { return stale_ && stale_(); }

  uint64_t pooled() const noexcept { return pooled_; }         ///< messages pushed from the pool
  uint64_t unpooled() const noexcept { return unpooled_; }     ///< messages built in a vector
  uint64_t waited_out() const noexcept { return waited_out_; } ///< pool empty past `wait`

private:
  size_t size() const noexcept { return buf_ ? buf_.size() : out_.size(); }

  data_plane& dp_;
  buffer_pool_ptr pool_;
  uint64_t id_;
  uint32_t group_;
  uint64_t cap_;
  std::chrono::milliseconds wait_;
  std::function<bool()> stale_;
  pool_buffer buf_;
  std::vector<std::byte> out_;
  uint32_t held_ = 0;
  uint64_t pooled_ = 0, unpooled_ = 0, waited_out_ = 0;
};

} // namespace prfaas::serving

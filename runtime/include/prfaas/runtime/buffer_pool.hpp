#pragma once

// A bounded pool of reused, optionally pre-faulted buffers for KV bytes.
//
// Fresh memory is expensive to touch: every 4 KiB page costs a page fault the first
// time it is written (here ~2.5 ms per MiB). A data plane that lands each received
// chunk in freshly allocated memory pays that on every transfer. The pool maps its
// buffers once (huge pages where the kernel offers them), optionally touches them at
// start-up, and hands them out again and again: after the first use a buffer costs no
// page fault.
//
// A buffer is taken with try_acquire() (never blocks; empty when all are out) or
// acquire() (waits up to a timeout: back-pressure for producers), filled through
// pool_buffer, then either dropped (it returns at once) or turned into a read-only
// bulk_ptr with share(): it returns when the last reference is dropped, on whatever
// thread that is. The pool's memory lives until the last buffer is back, even if the
// pool's owner is gone.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "prfaas/messages/remote_message.hpp"

namespace prfaas {

struct buffer_pool_config {
  uint64_t buffer_bytes = 4ull << 20; ///< bytes per buffer (rounded up to a page)
  uint32_t buffers = 16;              ///< how many
  bool prefault = false;              ///< touch every page at start-up
  bool huge_pages = true;             ///< MADV_HUGEPAGE (ignored where unsupported)
};

class buffer_pool;

/// One buffer taken from a pool; move-only. Returns to the pool when destroyed,
/// unless share() turned it into a bulk_ptr.
class pool_buffer {
public:
  pool_buffer() = default;
  pool_buffer(pool_buffer&& other) noexcept;
  pool_buffer& operator=(pool_buffer&& other) noexcept;
  pool_buffer(const pool_buffer&) = delete;
  pool_buffer& operator=(const pool_buffer&) = delete;
  ~pool_buffer();

  explicit operator bool() const noexcept { return data_ != nullptr; }
  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  size_t capacity() const noexcept { return capacity_; }
  /// Bytes in use (what share() exposes); starts at 0.
  size_t size() const noexcept { return size_; }
  /// Sets the bytes in use; throws std::length_error above capacity().
  void resize(size_t n);
  /// The whole buffer, for writing.
  std::span<std::byte> writable() noexcept { return {data_, capacity_}; }
  /// The first size() bytes as a read-only bulk buffer; this handle becomes empty.
  bulk_ptr share() &&;

private:
  friend class buffer_pool;
  pool_buffer(std::shared_ptr<buffer_pool> pool, uint32_t slot, std::byte* data, size_t capacity)
      : pool_(std::move(pool)), slot_(slot), data_(data), capacity_(capacity) {}
  void release() noexcept;

  std::shared_ptr<buffer_pool> pool_;
  uint32_t slot_ = 0;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

struct buffer_pool_stats {
  uint32_t buffers = 0;
  uint32_t available = 0;
  uint32_t peak_in_use = 0;
  uint64_t acquired = 0;  ///< buffers handed out, in total
  uint64_t exhausted = 0; ///< try_acquire() found none / acquire() timed out
  bool huge_pages = false;
  bool prefaulted = false;
};

class buffer_pool : public std::enable_shared_from_this<buffer_pool> {
public:
  /// Maps the buffers; throws std::runtime_error when the memory cannot be mapped.
  static std::shared_ptr<buffer_pool> create(buffer_pool_config cfg, std::string name);
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  /// A free buffer, or an empty handle when every buffer is out. Never blocks.
  pool_buffer try_acquire();
  /// Waits up to `timeout` for a free buffer; empty when none came back in time.
  pool_buffer acquire(std::chrono::milliseconds timeout);

  /// Runs (on the releasing thread, outside the pool's lock) each time a buffer comes
  /// back. One listener; set before the pool is shared between threads.
  void on_release(std::function<void()> listener);

  uint64_t buffer_bytes() const noexcept { return buffer_bytes_; }
  uint32_t capacity() const noexcept { return count_; }
  uint32_t available() const;
  buffer_pool_stats stats() const;
  const std::string& name() const noexcept { return name_; }

private:
  struct token {};

public:
  buffer_pool(token, buffer_pool_config cfg, std::string name);

private:
  friend class pool_buffer;
  pool_buffer take_locked();
  void give_back(uint32_t slot) noexcept;

  std::string name_;
  uint64_t buffer_bytes_ = 0;
  uint32_t count_ = 0;
  std::byte* base_ = nullptr;
  size_t mapped_ = 0;
  bool huge_pages_ = false;
  bool prefaulted_ = false;
  std::function<void()> listener_;
  struct shared_state;
  std::unique_ptr<shared_state> st_;
};

using buffer_pool_ptr = std::shared_ptr<buffer_pool>;

} // namespace prfaas

#include "prfaas/runtime/buffer_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace prfaas {

namespace {

constexpr size_t huge_page = 2u << 20;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

/// A shared buffer's bytes: returns its slot to the pool when the last reference goes.
class pooled_bulk final : public bulk_buffer {
public:
  explicit pooled_bulk(pool_buffer b) : buf_(std::move(b)) {}
  const std::byte* data() const noexcept override { return buf_.data(); }
  size_t size() const noexcept override { return buf_.size(); }
  bool pooled() const noexcept override { return true; }

private:
  pool_buffer buf_;
};

} // namespace

struct buffer_pool::shared_state {
  mutable std::mutex mtx;
  std::condition_variable freed;
  std::vector<uint32_t> free; ///< a stack: the most recently used buffer is reused first
  uint32_t peak_in_use = 0;
  uint64_t acquired = 0;
  uint64_t exhausted = 0;
};

// -- pool_buffer ---------------------------------------------------------------------

pool_buffer::pool_buffer(pool_buffer&& other) noexcept
    : pool_(std::move(other.pool_)), slot_(other.slot_), data_(other.data_),
      capacity_(other.capacity_), size_(other.size_) {
  other.data_ = nullptr;
  other.capacity_ = other.size_ = 0;
}

pool_buffer& pool_buffer::operator=(pool_buffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    slot_ = other.slot_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.capacity_ = other.size_ = 0;
  }
  return *this;
}

pool_buffer::~pool_buffer() {
  release();
}

void pool_buffer::release() noexcept {
  if (data_ == nullptr)
    return;
  auto pool = std::move(pool_);
  data_ = nullptr;
  capacity_ = size_ = 0;
  pool->give_back(slot_);
}

void pool_buffer::resize(size_t n) {
  if (n > capacity_)
    throw std::length_error("pool buffer: " + std::to_string(n) + " bytes asked, capacity " +
                            std::to_string(capacity_));
  size_ = n;
}

bulk_ptr pool_buffer::share() && {
  if (data_ == nullptr)
    return nullptr;
  return std::make_shared<pooled_bulk>(std::move(*this));
}

// -- buffer_pool ---------------------------------------------------------------------

std::shared_ptr<buffer_pool> buffer_pool::create(buffer_pool_config cfg, std::string name) {
  return std::make_shared<buffer_pool>(token{}, cfg, std::move(name));
}

buffer_pool::buffer_pool(token, buffer_pool_config cfg, std::string name)
    : name_(std::move(name)), st_(std::make_unique<shared_state>()) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  buffer_bytes_ = round_up(std::max<uint64_t>(cfg.buffer_bytes, 1), page);
  count_ = cfg.buffers;
  if (count_ == 0)
    return;
  // Whole huge pages, so the last buffer's tail is huge-page backed too.
  mapped_ = round_up(buffer_bytes_ * count_, huge_page);
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("buffer pool '" + name_ + "': cannot map " + std::to_string(mapped_) +
                             " bytes: " + std::strerror(errno));
  base_ = static_cast<std::byte*>(p);
#ifdef MADV_HUGEPAGE
  if (cfg.huge_pages)
    huge_pages_ = ::madvise(base_, mapped_, MADV_HUGEPAGE) == 0;
#endif
  if (cfg.prefault) {
#ifdef MADV_POPULATE_WRITE
    prefaulted_ = ::madvise(base_, mapped_, MADV_POPULATE_WRITE) == 0;
#endif
    if (!prefaulted_) { // older kernels: write one byte per page
      for (size_t at = 0; at < mapped_; at += page)
        base_[at] = std::byte{0};
      prefaulted_ = true;
    }
  }
  st_->free.reserve(count_);
  for (uint32_t i = count_; i-- > 0;)
    st_->free.push_back(i);
}

buffer_pool::~buffer_pool() {
  if (base_ != nullptr)
    ::munmap(base_, mapped_);
}

void buffer_pool::on_release(std::function<void()> listener) {
  listener_ = std::move(listener);
}

pool_buffer buffer_pool::take_locked() {
  auto slot = st_->free.back();
  st_->free.pop_back();
  ++st_->acquired;
  st_->peak_in_use = std::max<uint32_t>(st_->peak_in_use, count_ - uint32_t(st_->free.size()));
  return pool_buffer{shared_from_this(), slot, base_ + size_t{slot} * buffer_bytes_, buffer_bytes_};
}

pool_buffer buffer_pool::try_acquire() {
  std::lock_guard<std::mutex> guard{st_->mtx};
  if (st_->free.empty()) {
    ++st_->exhausted;
    return {};
  }
  return take_locked();
}

pool_buffer buffer_pool::acquire(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{st_->mtx};
  if (!st_->freed.wait_for(lock, timeout, [&] { return !st_->free.empty(); })) {
    ++st_->exhausted;
    return {};
  }
  return take_locked();
}

void buffer_pool::give_back(uint32_t slot) noexcept {
  {
    std::lock_guard<std::mutex> guard{st_->mtx};
    st_->free.push_back(slot);
  }
  st_->freed.notify_one();
  if (listener_)
    listener_();
}

uint32_t buffer_pool::available() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return static_cast<uint32_t>(st_->free.size());
}

buffer_pool_stats buffer_pool::stats() const {
  std::lock_guard<std::mutex> guard{st_->mtx};
  return {count_,           static_cast<uint32_t>(st_->free.size()),
          st_->peak_in_use, st_->acquired,
          st_->exhausted,   huge_pages_,
          prefaulted_};
}

} // namespace prfaas

#pragma once

// Memory for the index's big arrays (its node pages and table slots), on transparent
// huge pages where the kernel gives them only when asked (THP "madvise", Debian's
// default): 10M entries span ~550 MB, and on 4 KiB pages nearly every lookup also
// misses the TLB. Advice only: without huge pages the arrays work the same.

#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <new>

namespace prfaas::directory {

inline constexpr size_t huge_page_bytes = size_t{2} << 20;

struct free_deleter {
  void operator()(void* p) const { std::free(p); }
};

template <class T> using big_array = std::unique_ptr<T[], free_deleter>;

/// Room for `n` T, uninitialised (T must be an implicit-lifetime type); from 2 MiB up
/// 2 MiB-aligned, rounded up to whole huge pages and advised for them.
template <class T> big_array<T> allocate_big(size_t n) {
  size_t bytes = n * sizeof(T);
  void* p = nullptr;
  if (bytes >= huge_page_bytes) {
    bytes = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    p = std::aligned_alloc(huge_page_bytes, bytes);
    if (p)
      madvise(p, bytes, MADV_HUGEPAGE);
  } else {
    p = std::malloc(bytes);
  }
  if (!p)
    throw std::bad_alloc();
  return big_array<T>(static_cast<T*>(p));
}

} // namespace prfaas::directory

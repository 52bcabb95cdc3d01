// Compiled with -mavx2 (hash/CMakeLists.txt): xxHash's header sees __AVX2__ and inlines
// its AVX2 accumulate loop. Everything xxHash defines here is static (XXH_INLINE_ALL),
// so no AVX2 code leaks into symbols other translation units could pick up; this file's
// one external function is only called after the CPU was found to have AVX2.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "prfaas/hash/xxh3.hpp"

#ifndef __AVX2__
#error "xxh3_avx2.cpp must be compiled with -mavx2"
#endif

namespace prfaas::hash {

uint64_t xxh3_64_avx2(const void* data, size_t size) noexcept {
  return XXH3_64bits(data, size);
}

} // namespace prfaas::hash

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "prfaas/hash/xxh3.hpp"

namespace prfaas::hash {

namespace {

bool cpu_has_avx2() noexcept {
#ifdef PRFAAS_HASH_AVX2
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

using hash_fn = uint64_t (*)(const void*, size_t) noexcept;

hash_fn chosen() noexcept {
  static const hash_fn fn = cpu_has_avx2() ? &xxh3_64_avx2 : &xxh3_64_portable;
  return fn;
}

} // namespace

#ifndef PRFAAS_HASH_AVX2
// No AVX2 build of xxHash on this architecture: never chosen, defined for the tests.
uint64_t xxh3_64_avx2(const void* data, size_t size) noexcept {
  return XXH3_64bits(data, size);
}
#endif

uint64_t xxh3_64_portable(const void* data, size_t size) noexcept {
  return XXH3_64bits(data, size);
}

bool xxh3_uses_avx2() noexcept {
  return chosen() == &xxh3_64_avx2;
}

uint64_t xxh3_64(const void* data, size_t size) noexcept {
  return chosen()(data, size);
}

} // namespace prfaas::hash

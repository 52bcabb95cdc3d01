#pragma once
// XXH3-64 of KV bytes, the checksum of every KV chunk payload (engine chunk headers and
// data-plane frames). The value is the same bits as libxxhash's XXH3_64bits; only the
// speed differs: the AVX2 code path is taken where the CPU has it (Debian's libxxhash is
// built for SSE2, a third of the speed on the machines this runs on), checked once.

#include <cstddef>
#include <cstdint>

namespace prfaas::hash {

/// XXH3-64 (seed 0) of `size` bytes at `data`.
uint64_t xxh3_64(const void* data, size_t size) noexcept;

/// Whether xxh3_64 runs the AVX2 code path on this CPU.
bool xxh3_uses_avx2() noexcept;

/// The two code paths themselves, for tests that compare them with libxxhash.
/// `xxh3_64_avx2` may only be called where `xxh3_uses_avx2()` is true.
uint64_t xxh3_64_portable(const void* data, size_t size) noexcept;
uint64_t xxh3_64_avx2(const void* data, size_t size) noexcept;

} // namespace prfaas::hash

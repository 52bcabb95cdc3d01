#include <catch2/catch.hpp>

#include <xxhash.h>

#include <cstddef>
#include <random>
#include <vector>

#include "prfaas/hash/xxh3.hpp"

namespace h = prfaas::hash;

namespace {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<unsigned char> v(n);
  for (auto& b : v)
    b = static_cast<unsigned char>(rng());
  return v;
}

// Every code path this CPU can run, against libxxhash's own XXH3_64bits.
void check_all_paths(const unsigned char* p, size_t n) {
  const uint64_t want = XXH3_64bits(p, n);
  INFO("size " << n);
  CHECK(h::xxh3_64(p, n) == want);
  CHECK(h::xxh3_64_portable(p, n) == want);
  if (h::xxh3_uses_avx2())
    CHECK(h::xxh3_64_avx2(p, n) == want);
}

} // namespace

TEST_CASE("xxh3: the chosen path follows the CPU") {
#if defined(__x86_64__)
  CHECK(h::xxh3_uses_avx2() == (__builtin_cpu_supports("avx2") != 0));
#else
  CHECK_FALSE(h::xxh3_uses_avx2());
#endif
}

TEST_CASE("xxh3: every size up to 4 KiB, at every alignment, gives libxxhash's value") {
  // XXH3 has separate code for 0-16, 17-128, 129-240 bytes and the striped loop
  // beyond (64-byte stripes, 1 KiB blocks): every size crosses each boundary.
  auto data = random_bytes(4096 + 64, 7);
  for (size_t n = 0; n <= 4096; ++n)
    check_all_paths(data.data() + n % 61, n);
}

TEST_CASE("xxh3: chunk-sized inputs give libxxhash's value") {
  auto data = random_bytes((4u << 20) + 3, 11);
  for (size_t n : {size_t{65536}, size_t{1} << 20, (size_t{4} << 20) - 1, size_t{4} << 20})
    for (size_t off : {size_t{0}, size_t{1}, size_t{3}})
      check_all_paths(data.data() + off, n);
  // One flipped bit anywhere changes the value (the checksum's purpose), in every path.
  const size_t n = size_t{1} << 20;
  const uint64_t before = h::xxh3_64(data.data(), n);
  data[n / 2] ^= 0x10;
  CHECK(h::xxh3_64(data.data(), n) != before);
  check_all_paths(data.data(), n);
}

#include "tensor_init.hpp"

#include "arch_table.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

namespace prfaas::gguf_tool {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// SplitMix64: a fixed, fully specified generator (one chunk's stream).
class splitmix64 {
public:
  explicit splitmix64(uint64_t state) : state_(state) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  /// Uniform in the open interval (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }

private:
  uint64_t state_;
};

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

constexpr size_t chunk_values = size_t{1} << 20; // even: Box-Muller pairs never straddle

/// Fills one chunk of a tensor whose base name is `base` from the chunk's own stream.
void fill_chunk(std::string_view base, uint64_t stream, float stdev, std::span<float> out) {
  splitmix64 rng(stream);
  if (contains(base, "norm") || base == "ssm_d") {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  if (base == "ssm_a") {
    for (float& v : out)
      v = static_cast<float>(-(1.0 + 15.0 * rng.uniform()));
    return;
  }
  if (base == "ssm_dt.bias") {
    const double lo = std::log(1e-3), hi = std::log(1e-1);
    for (float& v : out) {
      const double dt = std::exp(lo + (hi - lo) * rng.uniform());
      v = static_cast<float>(std::log(std::expm1(dt)));
    }
    return;
  }
  // Box-Muller, two values per pair of uniforms.
  const double sd = stdev;
  for (size_t i = 0; i < out.size(); i += 2) {
    const double r = sd * std::sqrt(-2.0 * std::log(rng.uniform()));
    const double theta = 2.0 * std::numbers::pi * rng.uniform();
    out[i] = static_cast<float>(r * std::cos(theta));
    if (i + 1 < out.size())
      out[i + 1] = static_cast<float>(r * std::sin(theta));
  }
}

} // namespace

void fill_tensor(std::string_view name, uint64_t seed, float stdev, std::span<float> out,
                 unsigned n_threads) {
  const std::string_view base = tensor_base_name(name);
  const uint64_t tensor_stream = seed * 0x9e3779b97f4a7c15ull ^ fnv1a(name);
  const size_t n_chunks = (out.size() + chunk_values - 1) / chunk_values;
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t c; (c = next.fetch_add(1)) < n_chunks;) {
      const size_t begin = c * chunk_values;
      const size_t n = std::min(chunk_values, out.size() - begin);
      fill_chunk(base, splitmix64(tensor_stream + c).next(), stdev, out.subspan(begin, n));
    }
  };
  if (n_threads == 0)
    n_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::jthread> helpers;
  for (unsigned i = 1; i < std::min<size_t>(n_threads, n_chunks); ++i)
    helpers.emplace_back(work);
  work();
}

} // namespace prfaas::gguf_tool

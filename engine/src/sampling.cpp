#include "sampling.hpp"

#include "prfaas/engine/rng.hpp"

#include <cmath>

namespace prfaas::engine {

token sample_token(std::span<const float> logits, const sampling_params& params, uint32_t index) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best])
      best = i;
  if (params.temperature <= 0.0f)
    return static_cast<token>(best);
  const double mx = logits[best];
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  double sum = 0.0;
  for (float l : logits)
    sum += std::exp((static_cast<double>(l) - mx) * inv_t);
  const uint64_t bits = mix64(params.seed ^ mix64(0x73616d706c65ULL + index));
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53 * sum;
  double cum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cum += std::exp((static_cast<double>(logits[i]) - mx) * inv_t);
    if (u < cum)
      return static_cast<token>(i);
  }
  return static_cast<token>(best); // u rounded up to sum: fall back to the mode
}

} // namespace prfaas::engine

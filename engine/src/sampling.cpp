#include "sampling.hpp"

#include "prfaas/engine/rng.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace prfaas::engine {

namespace {

size_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best])
      best = i;
  return best;
}

/// The uniform draw of the index-th token of a request seeded `seed`, in [0, 1).
double uniform(uint64_t seed, uint32_t index) {
  const uint64_t bits = mix64(seed ^ mix64(0x73616d706c65ULL + index));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// The original sampler: softmax at the temperature over every token, one draw.
token draw_plain(std::span<const float> logits, size_t best, double inv_t, double u01) {
  const double mx = logits[best];
  double sum = 0.0;
  for (float l : logits)
    sum += std::exp((static_cast<double>(l) - mx) * inv_t);
  const double u = u01 * sum;
  double cum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cum += std::exp((static_cast<double>(logits[i]) - mx) * inv_t);
    if (u < cum)
      return static_cast<token>(i);
  }
  return static_cast<token>(best); // u rounded up to sum: fall back to the mode
}

/// Softmax at the temperature restricted to the top_p nucleus: candidates by
/// probability (ties by index), the smallest prefix whose mass reaches top_p, one draw
/// over it in that order.
token draw_nucleus(std::span<const float> logits, size_t best, double inv_t, double top_p,
                   double u01) {
  const double mx = logits[best];
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((static_cast<double>(logits[i]) - mx) * inv_t);
  const double want = top_p * sum;
  auto by_prob = [&](uint32_t a, uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  std::vector<uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  // Sort only as far as needed: a large vocabulary's nucleus is usually small.
  size_t sorted = 0;
  double mass = 0.0;
  size_t keep = 0;
  for (size_t k = 64; keep == 0; k *= 8) {
    k = std::min(k, order.size());
    std::partial_sort(order.begin() + static_cast<ptrdiff_t>(sorted),
                      order.begin() + static_cast<ptrdiff_t>(k), order.end(), by_prob);
    for (; sorted < k; ++sorted) {
      mass += p[order[sorted]];
      if (mass >= want) {
        keep = sorted + 1;
        break;
      }
    }
    if (k == order.size() && keep == 0)
      keep = order.size();
  }
  const double u = u01 * mass;
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[order[i]];
    if (u < cum)
      return static_cast<token>(order[i]);
  }
  return static_cast<token>(order[0]);
}

sampled_logprobs logprobs_of(std::span<const float> logits, token chosen, int32_t n_top) {
  const size_t best = argmax(logits);
  const double mx = logits[best];
  double sum = 0.0;
  for (float l : logits)
    sum += std::exp(static_cast<double>(l) - mx);
  const double log_z = mx + std::log(sum);
  auto lp = [&](size_t i) { return static_cast<float>(static_cast<double>(logits[i]) - log_z); };
  sampled_logprobs out;
  out.chosen = {chosen, lp(static_cast<size_t>(chosen))};
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  if (n > 0) {
    std::vector<uint32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(),
                      [&](uint32_t a, uint32_t b) {
                        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                      });
    for (size_t i = 0; i < n; ++i)
      out.top.push_back({static_cast<token>(order[i]), lp(order[i])});
  }
  return out;
}

} // namespace

std::span<const token> output_window(std::span<const token> tokens, uint32_t prompt_tokens,
                                     uint32_t first_index) {
  const size_t from = prompt_tokens >= first_index ? prompt_tokens - first_index : 0;
  return from <= tokens.size() ? tokens.subspan(from) : std::span<const token>{};
}

sample_result sample_token(std::span<const float> raw, const sampling_params& params,
                           uint32_t index, std::span<const token> output) {
  sample_result out;
  std::span<const float> logits = raw;
  std::vector<float> adjusted;
  if (!params.plain()) {
    adjusted.assign(raw.begin(), raw.end());
    for (auto [t, bias] : params.logit_bias)
      if (t >= 0 && static_cast<size_t>(t) < adjusted.size())
        adjusted[static_cast<size_t>(t)] += bias;
    if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
      std::unordered_map<token, uint32_t> counts;
      for (token t : output)
        ++counts[t];
      for (auto [t, c] : counts)
        if (t >= 0 && static_cast<size_t>(t) < adjusted.size())
          adjusted[static_cast<size_t>(t)] -=
              params.presence_penalty + params.frequency_penalty * static_cast<float>(c);
    }
    logits = adjusted;
  }
  const size_t best = argmax(logits);
  if (params.temperature <= 0.0f) {
    out.id = static_cast<token>(best);
  } else {
    const double inv_t = 1.0 / static_cast<double>(params.temperature);
    const double u = uniform(params.seed, index);
    out.id = params.top_p >= 1.0f ? draw_plain(logits, best, inv_t, u)
                                  : draw_nucleus(logits, best, inv_t, params.top_p, u);
  }
  if (params.logprobs >= 0)
    out.logprobs = logprobs_of(raw, out.id, params.logprobs);
  return out;
}

} // namespace prfaas::engine

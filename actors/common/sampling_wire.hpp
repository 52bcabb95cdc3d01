#pragma once

// engine::sampling_params and log-probabilities ↔ their serving_common.proto messages.

#include "prfaas/engine/types.hpp"
#include "prfaas/wire/serving_common.pb.h"

#include <algorithm>

namespace prfaas::serving {

inline void to_wire(const engine::sampling_params& p, Sampling& w) {
  w.set_temperature(p.temperature);
  w.set_seed(p.seed);
  w.set_first_index(p.first_index);
  w.set_top_p(p.top_p >= 1.0f ? 0.0f : p.top_p);
  w.set_presence_penalty(p.presence_penalty);
  w.set_frequency_penalty(p.frequency_penalty);
  for (auto [t, b] : p.logit_bias)
    (*w.mutable_logit_bias())[t] = b;
  w.set_logprobs(p.logprobs >= 0);
  w.set_top_logprobs(p.logprobs > 0 ? static_cast<uint32_t>(p.logprobs) : 0);
}

inline engine::sampling_params from_wire(const Sampling& w) {
  engine::sampling_params p;
  p.temperature = w.temperature();
  p.seed = w.seed();
  p.first_index = w.first_index();
  p.top_p = w.top_p() > 0.0f ? w.top_p() : 1.0f;
  p.presence_penalty = w.presence_penalty();
  p.frequency_penalty = w.frequency_penalty();
  for (auto& [t, b] : w.logit_bias())
    p.logit_bias.emplace_back(t, b);
  std::sort(p.logit_bias.begin(), p.logit_bias.end()); // a map's order is not defined
  p.logprobs = w.logprobs() ? static_cast<int32_t>(w.top_logprobs()) : -1;
  return p;
}

inline void to_wire(const engine::sampled_logprobs& lp, SampledLogprobs& w) {
  w.mutable_chosen()->set_id(lp.chosen.id);
  w.mutable_chosen()->set_logprob(lp.chosen.logprob);
  for (auto& t : lp.top) {
    auto* e = w.add_top();
    e->set_id(t.id);
    e->set_logprob(t.logprob);
  }
}

inline engine::sampled_logprobs from_wire(const SampledLogprobs& w) {
  engine::sampled_logprobs lp;
  lp.chosen = {w.chosen().id(), w.chosen().logprob()};
  for (auto& t : w.top())
    lp.top.push_back({t.id(), t.logprob()});
  return lp;
}

} // namespace prfaas::serving

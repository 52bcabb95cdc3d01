#pragma once

// A workload's request as a simulated client hands it to a gateway (sim_ingress.hpp):
// the prompt's bytes as tokens, a fixed number of output tokens (ignore_eos), its
// index as the sampling seed, streamed. Shared by `run` and `chaos`.

#include <memory>

#include "gateway/sim_ingress.hpp"
#include "loadgen/workload.hpp"
#include "prfaas/sim/sim_world.hpp"

namespace prfaas::sim {

inline std::shared_ptr<serving::accepted_request> sim_request(const loadgen::request_spec& spec,
                                                              sim_world::time_point accepted) {
  auto a = std::make_shared<serving::accepted_request>();
  a->id = "r" + std::to_string(spec.index);
  auto text = loadgen::prompt_text(spec);
  a->req.prompt.resize(text.size());
  for (size_t i = 0; i < text.size(); ++i)
    a->req.prompt[i] = static_cast<serving::token>(static_cast<unsigned char>(text[i]));
  a->req.max_tokens = spec.output_tokens;
  a->req.ignore_eos = true;
  a->req.seed = spec.index;
  a->req.stream = true;
  a->channel = std::make_shared<serving::stream_channel>();
  a->accepted = accepted;
  return a;
}

} // namespace prfaas::sim

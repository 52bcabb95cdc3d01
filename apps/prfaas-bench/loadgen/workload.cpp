#include "loadgen/workload.hpp"

#include <stdexcept>

namespace prfaas::loadgen {

std::string prompt_text(const request_spec& r) {
  if (r.hash_ids.empty())
    return random_text(r.prompt_seed, r.input_tokens);
  return block_prompt(r.hash_ids, r.input_tokens, r.block_tokens, r.prompt_seed);
}

void synthetic_config::validate() const {
  auto check = [](const length_dist& d, const std::string& name) {
    if (d.kind == length_dist::fixed && d.value == 0)
      throw std::invalid_argument("--" + name + "-len must be >= 1");
    if (d.kind == length_dist::lognormal) {
      truncated_lognormal probe{d.params}; // validates the parameters
      if (d.params.max < 1)
        throw std::invalid_argument("--" + name + "-max must be >= 1");
    }
  };
  check(input, "input");
  check(output, "output");
  double last = 0;
  for (auto& ph : input_phases) {
    if (input.kind != length_dist::lognormal)
      throw std::invalid_argument("--input-phase: needs lognormal input lengths");
    if (!(ph.from_s > last))
      throw std::invalid_argument("--input-phase: phases must start after 0 s, in increasing "
                                  "order (" +
                                  std::to_string(ph.from_s) + " s)");
    truncated_lognormal probe{ph.params};
    last = ph.from_s;
  }
  arrivals.validate();
  if (stop.max_requests == 0 && !(stop.duration_s > 0))
    throw std::invalid_argument("give --requests or --duration");
}

synthetic_workload::synthetic_workload(synthetic_config c, std::mt19937_64& rng)
    : c_(std::move(c)), arrivals_(make_arrivals(c_.arrivals)), lengths_rng_(rng()),
      arrivals_rng_(rng()), prompts_rng_(rng()) {
  c_.validate();
  if (c_.input.kind == length_dist::lognormal)
    input_ln_.emplace(c_.input.params);
  if (c_.output.kind == length_dist::lognormal)
    output_ln_.emplace(c_.output.params);
  for (auto& ph : c_.input_phases)
    phase_ln_.emplace_back(ph.params);
}

uint32_t synthetic_workload::draw(const length_dist& d,
                                  const std::optional<truncated_lognormal>& ln) {
  return ln ? std::max<uint32_t>(1, ln->tokens(lengths_rng_)) : d.value;
}

std::optional<request_spec> synthetic_workload::next() {
  if (over_ || (c_.stop.max_requests && issued_ >= c_.stop.max_requests))
    return std::nullopt;
  request_spec r;
  r.index = issued_;
  if (arrivals_) {
    r.arrival_s = arrivals_->next(arrivals_rng_);
    if (c_.stop.duration_s > 0 && r.arrival_s > c_.stop.duration_s) {
      over_ = true;
      return std::nullopt;
    }
  }
  size_t phase = 0; // how many phases have begun by this arrival
  while (phase < c_.input_phases.size() && c_.input_phases[phase].from_s <= r.arrival_s)
    ++phase;
  r.input_tokens = phase == 0 ? draw(c_.input, input_ln_)
                              : std::max<uint32_t>(1, phase_ln_[phase - 1].tokens(lengths_rng_));
  r.output_tokens = draw(c_.output, output_ln_);
  r.prompt_seed = prompts_rng_();
  ++issued_;
  return r;
}

std::optional<size_t> synthetic_workload::size() const {
  if (c_.stop.max_requests && (c_.stop.duration_s <= 0 || !arrivals_))
    return c_.stop.max_requests;
  return std::nullopt;
}

} // namespace prfaas::loadgen

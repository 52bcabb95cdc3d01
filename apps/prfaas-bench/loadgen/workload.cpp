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
  r.input_tokens = draw(c_.input, input_ln_);
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

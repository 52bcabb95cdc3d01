#include "run_inputs.hpp"

#include <stdexcept>

#include "loadgen/trace.hpp"

namespace prfaas::sim {

namespace lg = prfaas::loadgen;

namespace {

/// "T:MU" → from T seconds on, input lengths log-normal with that mu (the rest as `base`).
lg::input_phase parse_phase(const std::string& text, lg::lognormal_params base) {
  auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      base.mu = std::stod(text.substr(colon + 1));
      return {std::stod(text.substr(0, colon)), base};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--input-phase: expected SECONDS:MU (e.g. 300:8.5), got \"" + text +
                              "\"");
}

} // namespace

std::unique_ptr<lg::request_source> make_source(const run_options& o, std::mt19937_64& rng) {
  lg::stop_config stop{.max_requests = o.requests, .duration_s = o.duration_s};
  if (o.requests == 0 && o.duration_s <= 0)
    throw std::invalid_argument("--requests or --duration must be set");
  if (o.workload == "trace") {
    if (o.trace.empty())
      throw std::invalid_argument("--workload trace needs --trace FILE");
    lg::trace_options t;
    t.time_scale = o.trace_time_scale;
    t.input_scale = o.trace_input_scale;
    t.output_len = o.output_tokens;
    t.validate();
    return std::make_unique<lg::trace_workload>(lg::load_trace(o.trace), t, stop);
  }
  if (o.workload != "lognormal")
    throw std::invalid_argument("--workload: expected lognormal or trace, got \"" + o.workload +
                                "\"");
  lg::synthetic_config c;
  c.input = {lg::length_dist::lognormal, 0, {o.input_mu, o.input_sigma, o.input_min, o.input_max}};
  c.output = {lg::length_dist::fixed, o.output_tokens, {}};
  for (auto& text : o.input_phases)
    c.input_phases.push_back(parse_phase(text, c.input.params));
  c.arrivals.kind = lg::parse_arrival_kind(o.arrivals);
  c.arrivals.rate = o.rate;
  c.arrivals.burst_on_s = o.burst_on_s;
  c.arrivals.burst_off_s = o.burst_off_s;
  if (o.mmpp_rates.size() != 2 || o.mmpp_dwell_s.size() != 2)
    throw std::invalid_argument("--mmpp-rates and --mmpp-dwell take two values each");
  for (int i = 0; i < 2; ++i) {
    c.arrivals.mmpp_rate[i] = o.mmpp_rates[i];
    c.arrivals.mmpp_dwell_s[i] = o.mmpp_dwell_s[i];
  }
  c.stop = stop;
  c.validate();
  return std::make_unique<lg::synthetic_workload>(c, rng);
}

link_outage parse_outage(const std::string& text) {
  const auto fail = [&] {
    return std::invalid_argument("--link-down: expected START:SECONDS (every link) or "
                                 "START:SECONDS:A,B (the link between clusters A and B), "
                                 "e.g. 200:60 or 200:60:prfaas0,pd1; got \"" +
                                 text + "\"");
  };
  link_outage o;
  auto first = text.find(':');
  if (first == std::string::npos)
    throw fail();
  auto second = text.find(':', first + 1);
  try {
    o.start_s = std::stod(text.substr(0, first));
    o.seconds = std::stod(text.substr(first + 1, second == std::string::npos ? std::string::npos
                                                                             : second - first - 1));
  } catch (const std::exception&) {
    throw fail();
  }
  if (o.start_s < 0 || o.seconds <= 0)
    throw fail();
  if (second != std::string::npos) {
    const std::string pair = text.substr(second + 1);
    const auto comma = pair.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == pair.size())
      throw fail();
    o.a = pair.substr(0, comma);
    o.b = pair.substr(comma + 1);
  }
  return o;
}

/// "T:GBPS" → (seconds, bit/s).
std::pair<double, double> parse_step(const std::string& text) {
  auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      double t = std::stod(text.substr(0, colon));
      double g = std::stod(text.substr(colon + 1));
      if (t >= 0 && g > 0)
        return {t, g * 1e9};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--bandwidth-step: expected SECONDS:GBPS (e.g. 300:10), got \"" +
                              text + "\"");
}

} // namespace prfaas::sim

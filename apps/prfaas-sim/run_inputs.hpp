#pragma once

// What `prfaas-sim run` reads from its options besides the deployment: the workload
// (a request source), input-length phases, bandwidth steps and link outages.

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "loadgen/workload.hpp"
#include "run_command.hpp"

namespace prfaas::sim {

/// The request source `o` describes (lognormal or trace). Throws std::invalid_argument
/// naming the option that is wrong.
std::unique_ptr<loadgen::request_source> make_source(const run_options& o, std::mt19937_64& rng);

/// A `--link-down`: from start_s for `seconds`; between clusters a and b, or every
/// declared link when a is empty.
struct link_outage {
  double start_s = 0, seconds = 0;
  std::string a, b;
};
link_outage parse_outage(const std::string& text);

/// "T:GBPS" → (seconds, bit/s).
std::pair<double, double> parse_step(const std::string& text);

} // namespace prfaas::sim

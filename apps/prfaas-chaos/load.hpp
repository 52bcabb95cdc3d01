#pragma once

// The scenario's load, driven by `prfaas-bench serve` (the load generator: Poisson
// arrivals, the loadgen's prompt lengths, SSE parsing) run beside the gateway: one
// generator for the streamed share and one for the rest, each writing every request's
// outcome as JSON (--per-request). Each request is bounded by the scenario's deadline
// (--timeout), so the generators end by duration + deadline.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "topology.hpp"

namespace prfaas::chaos {

/// One request's outcome as prfaas-bench reported it (loadgen::to_json(request_result)).
struct request_record {
  bool stream = false;
  nlohmann::json r;
};

class load_driver {
public:
  load_driver(const topology& t, const load_spec& l, const environment& env);
  ~load_driver();

  /// Starts the generators; the load's clock starts now.
  void start();
  /// Waits up to `limit` for every generator to end; false if one had to be killed.
  bool wait(std::chrono::milliseconds limit);
  /// Every request of both generators; throws std::runtime_error when a generator
  /// failed or its results cannot be read.
  std::vector<request_record> results() const;

private:
  struct generator {
    bool stream;
    double rate;
    uint64_t seed;
    std::filesystem::path json;
    std::unique_ptr<proc::child_process> proc;
    std::optional<int> code;
  };

  const topology& topo_;
  load_spec load_;
  environment env_;
  std::vector<generator> gens_;
};

} // namespace prfaas::chaos

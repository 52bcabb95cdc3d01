#pragma once

// What to send and when: a request_source yields request_specs in order. A source is
// a pure function of its configuration and the engine it was given, so the same seed
// replays the same workload whatever the server does.

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "loadgen/arrivals.hpp"
#include "loadgen/lognormal.hpp"
#include "loadgen/prompt.hpp"

namespace prfaas::loadgen {

/// One request of a workload.
struct request_spec {
  uint64_t index = 0;   ///< 0-based position in the workload
  double arrival_s = 0; ///< seconds after the start; unused in closed loop
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  std::vector<uint64_t> hash_ids; ///< trace replay: ids of the prompt's blocks
  size_t block_tokens = trace_block_tokens;
  uint64_t prompt_seed = 0; ///< text of a synthetic prompt / of blocks past hash_ids

  bool operator==(const request_spec&) const = default;
};

/// The prompt text of `r`: exactly r.input_tokens bytes.
std::string prompt_text(const request_spec& r);

/// Yields a workload's requests in order of arrival.
class request_source {
public:
  virtual ~request_source() = default;
  /// The next request, or nullopt when the workload is over.
  virtual std::optional<request_spec> next() = 0;
  /// How many requests the whole workload has, when known in advance.
  virtual std::optional<size_t> size() const { return std::nullopt; }
};

/// A length that is either fixed or drawn from a truncated log-normal.
struct length_dist {
  enum kind_type { fixed, lognormal } kind = fixed;
  uint32_t value = 1024;   ///< when fixed
  lognormal_params params; ///< when lognormal
};

/// Where a run stops: after `max_requests` (0 = no cap) or past `duration_s` of
/// arrivals (0 = no cap). At least one must be set.
struct stop_config {
  size_t max_requests = 0;
  double duration_s = 0;
};

/// From `from_s` seconds on, input lengths follow `params` (a workload whose length
/// distribution shifts mid-run; lognormal input only).
struct input_phase {
  double from_s = 0;
  lognormal_params params;
};

struct synthetic_config {
  length_dist input{length_dist::lognormal, 0, {}}; ///< the paper's by default
  /// Later laws of the input lengths, by arrival time (ascending from_s); before the
  /// first, `input`.
  std::vector<input_phase> input_phases;
  length_dist output{length_dist::fixed, 1024, {}};
  arrival_config arrivals;
  stop_config stop;

  /// Throws std::invalid_argument naming the option that is out of range.
  void validate() const;
};

/// Synthetic requests: lengths, arrival gaps and prompt seeds each from their own
/// engine seeded from `rng`, so changing the arrival process leaves the lengths alone.
class synthetic_workload : public request_source {
public:
  synthetic_workload(synthetic_config c, std::mt19937_64& rng);
  std::optional<request_spec> next() override;
  std::optional<size_t> size() const override;

private:
  uint32_t draw(const length_dist& d, const std::optional<truncated_lognormal>& ln);

  synthetic_config c_;
  std::optional<truncated_lognormal> input_ln_, output_ln_;
  std::vector<truncated_lognormal> phase_ln_; ///< one per input phase
  std::unique_ptr<arrival_process> arrivals_;
  std::mt19937_64 lengths_rng_, arrivals_rng_, prompts_rng_;
  uint64_t issued_ = 0;
  bool over_ = false;
};

} // namespace prfaas::loadgen

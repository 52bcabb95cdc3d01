#pragma once

// Mooncake trace replay: one JSON object per line,
//   {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}
// where hash_ids name the prompt's 512-token blocks (the last may be partial) and equal
// leading ids mean a shared prefix.

#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loadgen/workload.hpp"

namespace prfaas::loadgen {

struct trace_record {
  double timestamp_ms = 0;
  uint32_t input_length = 0;
  uint32_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

/// A line that is not a valid record; what() reads "<file>:<line>: <why>".
class trace_error : public std::runtime_error {
public:
  trace_error(const std::string& file, size_t line, const std::string& why)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + why), line_(line) {}
  size_t line() const { return line_; }

private:
  size_t line_;
};

/// Every record of `in` (blank lines skipped); `name` labels errors. Throws trace_error
/// at the first bad line.
std::vector<trace_record> parse_trace(std::istream& in, const std::string& name);
/// The same for a file; a file that cannot be opened is a trace_error at line 0.
std::vector<trace_record> load_trace(const std::string& path);

/// How a trace is replayed.
struct trace_options {
  double time_scale = 1.0;  ///< arrival = (timestamp - first) * time_scale; 0.5 = 2x faster
  double input_scale = 1.0; ///< input lengths and block size both scaled, so a prefix
                            ///< shared over k of n blocks stays shared over k of n
  uint32_t max_input = 0;   ///< cap (0 = none); cuts trailing blocks
  uint32_t output_len = 0;  ///< replaces every output length (0 = the trace's)
  uint32_t max_output = 0;  ///< cap (0 = none)

  void validate() const; ///< throws std::invalid_argument naming the option
};

/// Replays records in timestamp order (stable, so multi-turn order holds for ties).
/// Stops after stop.max_requests records or past stop.duration_s of arrivals.
class trace_workload : public request_source {
public:
  trace_workload(std::vector<trace_record> records, trace_options o, stop_config stop = {});
  std::optional<request_spec> next() override;
  std::optional<size_t> size() const override;

  /// The request record `i` becomes (no stop rules applied).
  request_spec spec(size_t i) const;

private:
  std::vector<trace_record> records_;
  trace_options o_;
  stop_config stop_;
  size_t next_ = 0;
  bool over_ = false;
};

} // namespace prfaas::loadgen

#include "prfaas/planner/trace_lengths.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <unordered_set>

namespace prfaas::planner {

trace_lengths load_trace_lengths(const std::string& path, uint32_t block_tokens, bool cache) {
  if (block_tokens == 0)
    throw std::runtime_error("trace " + path + ": block_tokens must be positive");
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("trace " + path + ": cannot open file");
  trace_lengths out;
  std::unordered_set<uint64_t> cached_blocks; // the infinite prefix cache: chained block ids
  std::string line;
  double sum_in = 0, sum_unc = 0;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = "trace " + path + " line " + std::to_string(n);
    uint64_t input = 0;
    std::vector<uint64_t> ids;
    try {
      const auto j = nlohmann::json::parse(line);
      input = j.at("input_length").get<uint64_t>();
      if (cache)
        ids = j.at("hash_ids").get<std::vector<uint64_t>>();
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    uint64_t uncached = input;
    if (cache) {
      const size_t full = std::min<size_t>(ids.size(), input / block_tokens);
      size_t hit = 0;
      while (hit < full && cached_blocks.count(ids[hit]))
        ++hit;
      uncached = std::max<uint64_t>(1, input - hit * uint64_t{block_tokens});
      for (size_t i = 0; i < full; ++i)
        cached_blocks.insert(ids[i]);
    }
    out.uncached.push_back(uncached);
    sum_in += static_cast<double>(input);
    sum_unc += static_cast<double>(uncached);
  }
  out.requests = out.uncached.size();
  if (out.requests == 0)
    throw std::runtime_error("trace " + path + ": no requests");
  out.mean_input = sum_in / static_cast<double>(out.requests);
  out.mean_uncached = sum_unc / static_cast<double>(out.requests);
  return out;
}

} // namespace prfaas::planner

#pragma once
// The last line of a command's output parsed as JSON: how the benchmarks' `--json`
// figures are read by the tests that run them as child processes.

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace prfaas::test {

inline nlohmann::json last_json_line(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  if (end == std::string::npos)
    throw std::runtime_error("no output to read a JSON line from");
  auto begin = out.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return nlohmann::json::parse(out.substr(begin, end - begin + 1));
}

} // namespace prfaas::test

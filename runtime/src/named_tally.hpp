#pragma once

// A process-wide count per name, thread-safe: the fault points' and the probes'
// tallies over every node of a process (a simulation runs them all in one).

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace prfaas::detail {

class named_tally {
public:
  void add(std::string_view name) {
    std::lock_guard<std::mutex> g{mtx_};
    auto i = counts_.find(name);
    if (i == counts_.end())
      i = counts_.emplace(std::string{name}, 0).first;
    ++i->second;
  }
  std::map<std::string, uint64_t> snapshot() const {
    std::lock_guard<std::mutex> g{mtx_};
    return {counts_.begin(), counts_.end()};
  }
  void clear() {
    std::lock_guard<std::mutex> g{mtx_};
    counts_.clear();
  }

private:
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t, std::less<>> counts_;
};

} // namespace prfaas::detail

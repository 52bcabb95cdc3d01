#pragma once

// Process-wide, thread-safe registries of named things: the fault points' and the
// probes' inventories (what components registered) and tallies (passes over every node
// of a process; a simulation runs them all in one).

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <span>
#include <vector>
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

/// Entries with a `name`, registered by the components that own them; a name registered
/// already keeps its first entry.
template <class Info> class named_inventory {
public:
  template <size_t N>
  explicit named_inventory(const Info (&builtin)[N])
      : entries_(std::begin(builtin), std::end(builtin)) {}

  void add(std::span<const Info> list) {
    std::lock_guard<std::mutex> g{mtx_};
    for (auto& p : list)
      if (!find(p.name))
        entries_.push_back(p);
  }
  std::vector<Info> snapshot() const {
    std::lock_guard<std::mutex> g{mtx_};
    return entries_;
  }
  bool contains(std::string_view name) const {
    std::lock_guard<std::mutex> g{mtx_};
    return find(name) != nullptr;
  }

private:
  const Info* find(std::string_view name) const {
    auto it =
        std::find_if(entries_.begin(), entries_.end(), [&](auto& e) { return e.name == name; });
    return it == entries_.end() ? nullptr : &*it;
  }
  mutable std::mutex mtx_;
  std::vector<Info> entries_;
};

} // namespace prfaas::detail

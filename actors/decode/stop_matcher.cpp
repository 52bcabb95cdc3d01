#include "decode/stop_matcher.hpp"

#include <algorithm>

namespace prfaas::serving {

using engine::token;

stop_matcher::stop_matcher(std::vector<std::vector<token>> stops) {
  for (auto& s : stops)
    if (!s.empty())
      stops_.push_back(std::move(s));
}

std::vector<token> stop_matcher::feed(token t, bool& stopped) {
  stopped = false;
  if (stops_.empty())
    return {t};
  held_.push_back(t);
  for (auto& s : stops_)
    if (held_.size() >= s.size() && std::equal(s.begin(), s.end(), held_.end() - s.size())) {
      stopped = true;
      std::vector<token> out(held_.begin(), held_.end() - s.size());
      held_.clear();
      return out;
    }
  // Keep the longest suffix of held_ that is a proper prefix of some stop sequence.
  size_t keep = 0;
  for (auto& s : stops_)
    for (size_t k = std::min(held_.size(), s.size() - 1); k > keep; --k)
      if (std::equal(held_.end() - k, held_.end(), s.begin())) {
        keep = k;
        break;
      }
  std::vector<token> out(held_.begin(), held_.end() - keep);
  held_.erase(held_.begin(), held_.end() - keep);
  return out;
}

std::vector<token> stop_matcher::flush() {
  std::vector<token> out;
  out.swap(held_);
  return out;
}

} // namespace prfaas::serving

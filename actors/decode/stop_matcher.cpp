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
  // When several stop sequences end here (e.g. "c" and "bc"), cut the longest, so no
  // part of any of them is sent and the order of the stops does not matter. held_
  // always covers the longest: its previous tokens were a prefix kept below.
  size_t cut = 0;
  for (auto& s : stops_)
    if (s.size() > cut && held_.size() >= s.size() &&
        std::equal(s.begin(), s.end(), held_.end() - s.size()))
      cut = s.size();
  if (cut > 0) {
    stopped = true;
    std::vector<token> out(held_.begin(), held_.end() - cut);
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

#include "timeline.hpp"

#include <algorithm>

namespace prfaas::chaos {

namespace {

bool earlier(const fault_event& a, const fault_event& b) {
  return a.at_s != b.at_s ? a.at_s < b.at_s : (!a.apply && b.apply);
}

} // namespace

std::vector<fault_event> timeline(const scenario& s) {
  std::vector<fault_event> ev;
  for (size_t i = 0; i < s.faults.size(); ++i) {
    ev.push_back({s.faults[i].at.count(), i, true});
    if (auto end = s.faults[i].ends())
      ev.push_back({end->count(), i, false});
  }
  std::stable_sort(ev.begin(), ev.end(), earlier);
  return ev;
}

void keep_duration(std::vector<fault_event>& events, size_t next, size_t fault, double late) {
  if (late <= 0 || next >= events.size())
    return;
  for (size_t i = next; i < events.size(); ++i)
    if (events[i].fault == fault && !events[i].apply)
      events[i].at_s += late;
  std::stable_sort(events.begin() + static_cast<std::ptrdiff_t>(next), events.end(), earlier);
}

} // namespace prfaas::chaos

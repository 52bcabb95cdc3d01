#include "prfaas/runtime/dedup_cache.hpp"

#include <functional>

namespace prfaas {

size_t dedup_cache::key_hash::operator()(const key& k) const noexcept {
  size_t h = std::hash<std::string>{}(k.node);
  h ^= std::hash<uint64_t>{}(k.incarnation) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= std::hash<uint64_t>{}(k.request_id) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

dedup_cache::dedup_cache(std::chrono::nanoseconds window, size_t capacity)
    : window_(window), capacity_(capacity == 0 ? 1 : capacity) {}

void dedup_cache::expire(time_point now) {
  while (!order_.empty()) {
    const bool over = entries_.size() > capacity_;
    if (!over && now - order_.front().second < window_)
      break;
    auto i = entries_.find(order_.front().first);
    // The order queue may hold keys already evicted or re-queued; only the pair that
    // matches the entry's last queueing counts.
    if (i != entries_.end() && i->second.inserted == order_.front().second) {
      if (!over && !i->second.result && i->second.deadline > now && window_.count() > 0) {
        i->second.inserted = now; // still running and awaited: look again in a window
        order_.emplace_back(i->first, now);
      } else {
        entries_.erase(i);
        ++evicted_;
      }
    }
    order_.pop_front();
  }
}

dedup_cache::verdict dedup_cache::check(const key& k, time_point now, const answer** cached,
                                        time_point deadline) {
  expire(now);
  auto i = entries_.find(k);
  if (i == entries_.end()) {
    entries_.emplace(k, entry{now, deadline, std::nullopt});
    order_.emplace_back(k, now);
    if (entries_.size() > capacity_)
      expire(now);
    return verdict::fresh;
  }
  if (!i->second.result)
    return verdict::in_progress;
  if (cached)
    *cached = &*i->second.result;
  return verdict::answered;
}

dedup_cache::verdict dedup_cache::peek(const key& k, time_point now, const answer** cached) {
  expire(now);
  auto i = entries_.find(k);
  if (i == entries_.end())
    return verdict::fresh;
  if (!i->second.result)
    return verdict::in_progress;
  if (cached)
    *cached = &*i->second.result;
  return verdict::answered;
}

void dedup_cache::complete(const key& k, answer a, time_point now) {
  auto i = entries_.find(k);
  if (i == entries_.end())
    return;
  i->second.result = std::move(a);
  i->second.inserted = now;
  order_.emplace_back(k, now);
}

} // namespace prfaas

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
  : window_(window), capacity_(capacity == 0 ? 1 : capacity) {
}

void dedup_cache::expire(time_point now) {
  while (!order_.empty()
         && (now - order_.front().second >= window_ || entries_.size() > capacity_)) {
    auto i = entries_.find(order_.front().first);
    // The order queue may hold keys already evicted; only drop the matching entry.
    if (i != entries_.end() && i->second.inserted == order_.front().second) {
      entries_.erase(i);
      ++evicted_;
    }
    order_.pop_front();
  }
}

dedup_cache::verdict dedup_cache::check(const key& k, time_point now, const answer** cached) {
  expire(now);
  auto i = entries_.find(k);
  if (i == entries_.end()) {
    entries_.emplace(k, entry{now, std::nullopt});
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

void dedup_cache::complete(const key& k, answer a) {
  auto i = entries_.find(k);
  if (i != entries_.end())
    i->second.result = std::move(a);
}

} // namespace prfaas

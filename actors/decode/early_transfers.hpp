#pragma once

// KV transfers that reached the decode worker before their order (the order travels
// gateway → decode, the KV prefill → decode: either may arrive first). They wait here,
// bounded: at most `max_transfers` of them and `max_bytes` in all (the oldest go first
// to make room), each at most `ttl` (an order that never comes). Plain class, no actor:
// the decode worker parks and takes; tests/unit/decode drives it directly.

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace prfaas::serving {

/// The bounds of the early transfers (the decode worker's max_early_* and early_ttl).
struct early_transfer_limits {
  size_t max_transfers = 64;
  uint64_t max_bytes = 1ull << 30;
  std::chrono::steady_clock::duration ttl = std::chrono::seconds(30);
};

template <class Transfer> class early_transfers {
public:
  using clock_type = std::chrono::steady_clock;
  using limits = early_transfer_limits;

  explicit early_transfers(limits l) : limits_(l) {}

  /// Parks the transfer of `request_id` (replacing an earlier one of the same request);
  /// returns the requests whose transfers were dropped to stay within the limits. A
  /// transfer larger than `max_bytes` on its own is not kept: its own id comes back.
  std::vector<std::string> park(const std::string& request_id, Transfer t, uint64_t bytes,
                                clock_type::time_point now) {
    std::vector<std::string> dropped;
    forget(request_id);
    if (bytes > limits_.max_bytes || limits_.max_transfers == 0) {
      dropped.push_back(request_id);
      return dropped;
    }
    while (!order_.empty() &&
           (by_id_.size() + 1 > limits_.max_transfers || bytes_ + bytes > limits_.max_bytes)) {
      dropped.push_back(order_.front());
      forget(order_.front());
    }
    order_.push_back(request_id);
    by_id_.emplace(request_id, entry{std::move(t), bytes, now, std::prev(order_.end())});
    bytes_ += bytes;
    return dropped;
  }

  /// The parked transfer of `request_id`, if any (it is no longer parked).
  std::optional<Transfer> take(const std::string& request_id) {
    auto it = by_id_.find(request_id);
    if (it == by_id_.end())
      return std::nullopt;
    Transfer t = std::move(it->second.transfer);
    forget(request_id);
    return t;
  }

  void forget(const std::string& request_id) {
    auto it = by_id_.find(request_id);
    if (it == by_id_.end())
      return;
    bytes_ -= it->second.bytes;
    order_.erase(it->second.pos);
    by_id_.erase(it);
  }

  /// Drops the transfers parked longer than `ttl`; returns their requests.
  std::vector<std::string> expire(clock_type::time_point now) {
    std::vector<std::string> out;
    while (!order_.empty() && now - by_id_.at(order_.front()).parked > limits_.ttl) {
      out.push_back(order_.front());
      forget(order_.front());
    }
    return out;
  }

  size_t size() const { return by_id_.size(); }
  uint64_t bytes() const { return bytes_; }

private:
  struct entry {
    Transfer transfer;
    uint64_t bytes;
    clock_type::time_point parked;
    std::list<std::string>::iterator pos;
  };
  limits limits_;
  std::list<std::string> order_; ///< oldest first (park order; re-parking moves to the back)
  std::unordered_map<std::string, entry> by_id_;
  uint64_t bytes_ = 0;
};

} // namespace prfaas::serving

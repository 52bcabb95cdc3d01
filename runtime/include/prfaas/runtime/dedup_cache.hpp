#pragma once

// Receiver-side de-duplication of retried requests. A request is identified by
// (source node, source incarnation, request id). The first copy runs; copies that
// arrive while it runs are dropped; copies that arrive after it finished get the
// cached answer again. An answered entry is kept for `window` after its answer; a
// request still running is kept as long as its requester waits for it (its
// deadline), however long past `window` that is — else a retry of a request that
// waits longer than the window (a long prefill queue) would run it a second time.
// The cache never holds more than `capacity` entries (oldest evicted first, running
// or not), so memory is bounded.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include "prfaas/messages/remote_message.hpp"

namespace prfaas {

class dedup_cache {
public:
  using time_point = std::chrono::steady_clock::time_point;

  struct key {
    std::string node;
    uint64_t incarnation = 0;
    uint64_t request_id = 0;
    friend bool operator==(const key&, const key&) = default;
  };

  /// A finished request's answer, kept to answer retries.
  struct answer {
    std::string peer;   ///< where the answer went
    std::string header; ///< serialized response envelope
    bulk_ptr bulk;
  };

  enum class verdict { fresh, in_progress, answered };

  dedup_cache(std::chrono::nanoseconds window, size_t capacity);

  /// Looks `k` up at `now`; a fresh key is recorded as in progress, kept at least
  /// until `deadline` (when its requester stops waiting) while it runs.
  verdict check(const key& k, time_point now, const answer** cached, time_point deadline = {});
  /// Looks `k` up without recording it (a probe): fresh means "not held".
  verdict peek(const key& k, time_point now, const answer** cached);

  /// Records the answer of a request that was in progress; kept for `window` from `now`.
  void complete(const key& k, answer a, time_point now);

  size_t size() const { return entries_.size(); }
  uint64_t evicted() const { return evicted_; }

private:
  struct key_hash {
    size_t operator()(const key& k) const noexcept;
  };
  struct entry {
    time_point inserted; ///< when queued for expiry (last)
    time_point deadline; ///< kept at least until then while in progress
    std::optional<answer> result;
  };

  void expire(time_point now);

  std::chrono::nanoseconds window_;
  size_t capacity_;
  std::unordered_map<key, entry, key_hash> entries_;
  std::deque<std::pair<key, time_point>> order_; ///< expiry order (stale pairs skipped)
  uint64_t evicted_ = 0;
};

} // namespace prfaas

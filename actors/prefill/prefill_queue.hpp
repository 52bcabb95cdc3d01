#pragma once

// The prefill worker's queue as a plain state machine: admission, order, deadlines,
// the engine's pace, cancellation and the bookkeeping of the work ahead. No actor, no
// engine, no clock of its own (the caller passes `now`): the prefill worker
// (prefill_worker.cpp) feeds it events and carries out what it returns; unit tests drive
// it with any order of events (tests/unit/prefill).
//
// An order's life:
//
//   admit ──► pulling ──pull_ended──► queued ──next──► running ──engine_done──► sent
//     │          │                       │                │ (transfer open)       │
//     └ refused  └──────cancel───────────┴─► gone         └─transfer_ended──┐ └─transfer_ended─►
//     gone
//                                          (answered        (engine_done then gone)
//                                           by the caller)
//
// `next` starts the order at the head of the queue, and with it the orders behind it
// while they fit a batch the engine computes together (batch_limit: the engine's
// prefill_batch; none for engines that gain nothing from it); it also drops queued
// orders past their deadline (the caller answers them). An order
// leaves the queue exactly once; the work it was admitted with counts towards
// `queued_tokens` until it leaves the queue or the engine is done with it.
//
// Order: a PrfaaS worker may serve several PD clusters (an order's `origin`). Their
// orders share it by start-time fair queueing over tokens, weighted by each origin's
// `weight` (deployment_config::fair_weight): an order's start tag is the later of the tag now in
// service and the finish tag of its origin's previous order, its finish tag that plus
// work / weight, and the smallest start tag runs next (ties: arrival). A PD cluster
// with more work queued than its share waits behind the others' shares; none starves,
// and a lone origin (every deployment with one PD cluster) is served first come first
// served, exactly. Admission estimates an order's wait from the work that would run
// before it under this order.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace prfaas::serving {

class prefill_queue {
public:
  using clock_type = std::chrono::steady_clock;
  using key = uint64_t;

  struct order {
    std::string request_id;
    uint64_t transfer_id = 0;
    uint64_t work = 0; ///< tokens it is expected to compute
    clock_type::time_point deadline;
    std::chrono::nanoseconds budget{0}; ///< time left when it arrived; 0 = none
    bool pull_first = false;            ///< waits for a cache move before queueing
    std::string origin;                 ///< the PD cluster it serves ("" = none named)
    double weight = 1;                  ///< its origin's weight here (> 0)
  };

  struct refusal {
    std::string why;
  };

  /// What `next` decided: the orders to start (computed together, in this order; none
  /// while the engine is busy), and the queued ones whose deadline passed (removed; the
  /// caller answers them).
  struct step {
    std::vector<key> start;
    std::vector<key> expired;
  };

  /// How many orders the engine computes together: the head of the queue always
  /// starts, the orders behind it join while there are at most `orders` and their work
  /// sums to at most `tokens` (so a long prompt runs alone, and a batch of short ones
  /// takes about one engine call). The default starts one order at a time.
  struct batch_limit {
    size_t orders = 1;
    uint64_t tokens = 0;
  };

  /// What a cancel touches: orders removed before running (the caller answers them
  /// cancelled) and open transfers to cancel (their end answers the order).
  struct cancel_actions {
    std::vector<key> removed;
    std::vector<key> cancel_transfer;
  };

  explicit prefill_queue(size_t max_queue) : max_queue_(max_queue) {}

  /// Takes the order or says why not: the queue is full, or the work queued ahead of it
  /// cannot be done within its budget at the engine's measured pace.
  std::variant<key, refusal> admit(const order& o);
  /// Its cache move ended (moved, or given up): the order joins the queue.
  void pull_ended(key k);
  /// The engine is free (and built): the next orders to run, dropping expired ones.
  step next(clock_type::time_point now, batch_limit limit);
  /// One order at a time.
  step next(clock_type::time_point now);
  /// The engine finished a running order; a prefill of `computed` tokens that took
  /// `engine_time` (its share of a batch's time) updates the pace (`ok` = it produced
  /// its KV). The engine is free again when every order of its batch is done.
  void engine_done(key k, uint32_t computed, std::chrono::nanoseconds engine_time, bool ok);
  /// The order's transfer ended (delivered, failed or cancelled).
  void transfer_ended(key k);
  /// Cancels the orders of `request_id` (of that attempt only unless transfer_id is 0).
  cancel_actions cancel(const std::string& request_id, uint64_t transfer_id);

  bool contains(key k) const { return orders_.count(k) != 0; }
  /// Orders in the queue (not pulling, not running).
  size_t queued() const { return fifo_.size(); }
  /// Orders the engine is computing (one batch).
  size_t running() const { return running_.size(); }
  /// Orders whose transfer is open (running or sent).
  size_t transferring() const;
  /// Work admitted and not done: pulling, queued and running orders.
  uint64_t queued_tokens() const { return queued_tokens_; }
  /// The admitted work that would run before an order like `o` admitted now: all of it,
  /// less the queued orders fair queueing would run after it (none with one origin).
  uint64_t work_ahead(const order& o) const;
  /// The engine's prefill pace: the rate of each prefill of at least `pace_min_tokens`,
  /// smoothed by `pace_smoothing` per prefill (0 until one finished): what a queue's
  /// wait is estimated at.
  double tokens_per_s() const { return tokens_per_s_; }
  static constexpr uint32_t pace_min_tokens = 64;
  static constexpr double pace_smoothing = 0.2;
  /// The last `recent_kept` prefills of at least `pace_min_tokens` (oldest first): their
  /// computed tokens and engine seconds.
  struct prefill_sample {
    uint32_t tokens = 0;
    double seconds = 0;
  };
  const std::deque<prefill_sample>& recent() const { return recent_; }
  static constexpr size_t recent_kept = 8;
  size_t max_queue() const { return max_queue_; }
  size_t size() const { return orders_.size(); }

private:
  enum class phase { pulling, queued, running, sent };
  struct entry {
    order o;
    phase ph;
    bool transfer_open = false;
    double start_tag = 0; ///< fair-queueing start tag (set when it joins the queue)
  };
  void remove(key k);
  void settle_work(entry& e);
  /// The start tag an order of `o` would get now.
  double start_tag(const order& o) const;
  /// Puts `k` in the queue at its start tag's place and advances its origin's finish tag.
  void enqueue(key k);

  size_t max_queue_;
  key next_key_ = 1;
  std::map<key, entry> orders_;
  std::deque<key> fifo_;
  std::set<key> running_;
  double virtual_time_ = 0;              ///< start tag of the order last started
  std::map<std::string, double> finish_; ///< per origin: its last order's finish tag
  uint64_t queued_tokens_ = 0;
  double tokens_per_s_ = 0;
  std::deque<prefill_sample> recent_;
};

} // namespace prfaas::serving

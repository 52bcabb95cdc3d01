#pragma once

// Internal to the llama engine: the cores that the llama engines of one process share.
//
// ggml's compute threads meet at a spinning barrier after every operation of a graph.
// When the engines of one process (an all-in-one node: a prefill and a decode worker
// each with its own context) together run more compute threads than the process may
// use cores, a descheduled thread stalls its peers at every barrier and both graphs
// crawl. In that case, and only then, the engines take turns: one llama_decode at a
// time, first come first served (a decode step waits for at most one prefill slice).
// Where the threads fit the cores, a turn costs nothing.

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace prfaas::engine::llama_detail {

class cpu_gate {
public:
  /// The process's gate.
  static cpu_gate& instance();

  /// A gate of its own over `cores` cores (tests; engines use instance()).
  explicit cpu_gate(uint32_t cores) : cores_(cores) {}

  /// The cores this process may run on (its CPU affinity).
  static uint32_t cores();

  /// An engine with `threads` compute threads starts (add) or stops (remove).
  void add(uint32_t threads);
  void remove(uint32_t threads);

  /// Whether the engines of this process take turns now.
  bool shared() const;

  /// Turns drawn and not yet over: the one running plus those waiting.
  uint64_t queued() const;

  /// Seconds engines have waited for their turn, in total.
  double waited_seconds() const;

  /// One graph's hold on the cores: waits for its turn while they are shared.
  class turn {
  public:
    explicit turn(cpu_gate& g);
    ~turn();
    turn(const turn&) = delete;
    turn& operator=(const turn&) = delete;

    /// Seconds this turn waited before it began.
    double waited() const { return waited_; }

  private:
    cpu_gate& gate_;
    bool held_ = false;
    double waited_ = 0;
  };

private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  const uint32_t cores_;
  uint32_t threads_ = 0;
  uint64_t next_ticket_ = 0; ///< the ticket the next caller draws
  uint64_t serving_ = 0;     ///< the ticket whose turn it is
  double waited_ = 0;
};

} // namespace prfaas::engine::llama_detail

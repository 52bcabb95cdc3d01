#pragma once

// Internal to the llama engine: the one thread every llama_decode of a process runs on.
//
// ggml's compute threads meet at a barrier after every operation of a graph; with the
// OpenMP build tools/llama-cpp.sh makes, an `omp barrier`. libgomp keeps a thread team
// for every thread that ever ran a graph and counts all their threads; once they
// outnumber the cores it stops spinning at barriers and sleeps on a futex instead: a
// context switch at every operation of every graph (measured: 15% of a decode
// worker's time in the kernel, single-stream decode 15 tokens/s where llama-server
// reaches 21 on the same cores). An all-in-one node has a prefill and a decode worker,
// each with its own context and thread; so every graph of the process runs here, on
// one thread, one at a time and first come first served: libgomp sees one team, and
// two graphs never fight over the cores at their barriers. A decode step waits for at
// most one prefill slice (`batch` tokens), as in llama-server's single loop. Workers
// that must compute in parallel belong in separate processes (separate nodes).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace prfaas::engine::llama_detail {

class cpu_gate {
public:
  /// The process's gate.
  static cpu_gate& instance();

  cpu_gate() = default;
  ~cpu_gate();
  cpu_gate(const cpu_gate&) = delete;
  cpu_gate& operator=(const cpu_gate&) = delete;

  /// Runs `graph` (one llama_decode) on the gate's thread, after the graphs submitted
  /// before it, and returns its result. `waited`: seconds it queued.
  int32_t run(const std::function<int32_t()>& graph, double& waited);

  /// Seconds graphs have queued, in total.
  double waited_seconds() const;

private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  double waited_ = 0;
  std::thread worker_; ///< started by the first run()
};

} // namespace prfaas::engine::llama_detail

#include "llama/cpu_gate.hpp"

#include <sched.h>

#include <chrono>
#include <thread>

namespace prfaas::engine::llama_detail {

cpu_gate& cpu_gate::instance() {
  static cpu_gate gate(cores());
  return gate;
}

uint32_t cpu_gate::cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<uint32_t>(CPU_COUNT(&set));
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

void cpu_gate::add(uint32_t threads) {
  std::lock_guard lock(mu_);
  threads_ += threads;
}

void cpu_gate::remove(uint32_t threads) {
  std::lock_guard lock(mu_);
  threads_ -= threads;
}

bool cpu_gate::shared() const {
  std::lock_guard lock(mu_);
  return threads_ > cores_;
}

uint64_t cpu_gate::queued() const {
  std::lock_guard lock(mu_);
  return next_ticket_ - serving_;
}

double cpu_gate::waited_seconds() const {
  std::lock_guard lock(mu_);
  return waited_;
}

cpu_gate::turn::turn(cpu_gate& g) : gate_(g) {
  std::unique_lock lock(g.mu_);
  if (g.threads_ <= g.cores_ && g.next_ticket_ == g.serving_)
    return; // the threads fit and no one holds a turn: run freely
  const uint64_t ticket = g.next_ticket_++;
  held_ = true;
  if (ticket == g.serving_)
    return;
  const auto t0 = std::chrono::steady_clock::now();
  g.cv_.wait(lock, [&] { return ticket == g.serving_; });
  waited_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g.waited_ += waited_;
}

cpu_gate::turn::~turn() {
  if (!held_)
    return;
  std::lock_guard lock(gate_.mu_);
  ++gate_.serving_;
  gate_.cv_.notify_all();
}

} // namespace prfaas::engine::llama_detail

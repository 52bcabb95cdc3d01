#include "prfaas/runtime/peer_epochs.hpp"

namespace prfaas {

namespace {

/// Raises `a` to `v` if `v` is higher; returns the value it held before.
uint64_t raise(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  auto known = a.load(std::memory_order_relaxed);
  while (v > known && !a.compare_exchange_weak(known, v, std::memory_order_acq_rel)) {
  }
  return known;
}

} // namespace

peer_epochs::peer_epochs(const std::set<std::string>& peers) {
  for (auto& p : peers)
    peers_.emplace(p, std::make_unique<entry>());
}

const peer_epochs::entry* peer_epochs::find(const std::string& peer) const noexcept {
  auto i = peers_.find(peer);
  return i == peers_.end() ? nullptr : i->second.get();
}

peer_epochs::entry* peer_epochs::find(const std::string& peer) noexcept {
  auto i = peers_.find(peer);
  return i == peers_.end() ? nullptr : i->second.get();
}

peer_epochs::verdict peer_epochs::judge(const std::string& peer, uint64_t incarnation) noexcept {
  auto* e = find(peer);
  if (e == nullptr)
    return verdict::unknown;
  if (raise(e->newest, incarnation) > incarnation)
    return verdict::stale;
  if (incarnation != 0 && e->fenced.load(std::memory_order_acquire) == incarnation)
    return verdict::fenced;
  return verdict::accept;
}

bool peer_epochs::note(const std::string& peer, uint64_t incarnation) noexcept {
  auto* e = find(peer);
  return e == nullptr || raise(e->newest, incarnation) <= incarnation;
}

void peer_epochs::fence(const std::string& peer, uint64_t incarnation) noexcept {
  if (auto* e = find(peer); e != nullptr && incarnation != 0)
    e->fenced.store(incarnation, std::memory_order_release);
}

void peer_epochs::lift(const std::string& peer, uint64_t incarnation) noexcept {
  auto* e = find(peer);
  if (e == nullptr)
    return;
  auto f = e->fenced.load(std::memory_order_acquire);
  // A newer incarnation lifts the fence of an older one as well.
  while (f != 0 && f <= incarnation &&
         !e->fenced.compare_exchange_weak(f, 0, std::memory_order_acq_rel)) {
  }
}

bool peer_epochs::is_fenced(const std::string& peer, uint64_t incarnation) const noexcept {
  auto* e = find(peer);
  return e != nullptr && incarnation != 0 &&
         e->fenced.load(std::memory_order_acquire) == incarnation;
}

bool peer_epochs::notice(const std::string& peer, uint64_t count) noexcept {
  auto* e = find(peer);
  return e != nullptr && raise(e->notices, count) < count;
}

uint64_t peer_epochs::notices(const std::string& peer) const noexcept {
  auto* e = find(peer);
  return e == nullptr ? 0 : e->notices.load(std::memory_order_acquire);
}

uint64_t peer_epochs::newest(const std::string& peer) const noexcept {
  auto* e = find(peer);
  return e == nullptr ? 0 : e->newest.load(std::memory_order_acquire);
}

const char* to_string(peer_epochs::verdict v) {
  switch (v) {
  case peer_epochs::verdict::accept:
    return "accept";
  case peer_epochs::verdict::stale:
    return "stale";
  case peer_epochs::verdict::fenced:
    return "fenced";
  case peer_epochs::verdict::unknown:
    return "unknown";
  }
  return "?";
}

} // namespace prfaas

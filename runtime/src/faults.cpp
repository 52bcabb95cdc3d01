#include "prfaas/runtime/faults.hpp"

#include <stdexcept>

#include <xxhash.h>

#include "named_tally.hpp"

namespace prfaas {

namespace {

/// The runtime's own fault points; components register theirs beside their code.
constexpr fault_point_info runtime_points[] = {
    {"transport.drop",
     "an outbound control-plane frame (message, request, reply, heartbeat) is not sent"},
    {"transport.duplicate", "an outbound control-plane frame is sent twice"},
};

detail::named_inventory<fault_point_info>& points() {
  static detail::named_inventory<fault_point_info> r{runtime_points};
  return r;
}

detail::named_tally& tally() {
  static detail::named_tally t;
  return t;
}

} // namespace

std::map<std::string, uint64_t> fault_tally() {
  return tally().snapshot();
}

void reset_fault_tally() {
  tally().clear();
}

std::vector<fault_point_info> fault_inventory() {
  return points().snapshot();
}

void register_fault_points(std::span<const fault_point_info> list) {
  points().add(list);
}

bool is_fault_point(std::string_view name) {
  return points().contains(name);
}

fault_points::fault_points(const fault_config& cfg, std::string_view stream)
    : seed_(cfg.seed), stream_(XXH3_64bits(stream.data(), stream.size())) {
  rng_.seed(stream_ ^ seed_);
  for (auto& [name, p] : cfg.points)
    set(name, p);
}

void fault_points::set_seed(uint64_t seed) {
  std::lock_guard<std::mutex> g{mtx_};
  seed_ = seed;
  rng_.seed(stream_ ^ seed_);
  on_.store(seed_ != 0 && !p_.empty(), std::memory_order_relaxed);
}

void fault_points::set(std::string_view point, double probability) {
  if (!is_fault_point(point))
    throw std::invalid_argument("unknown fault point \"" + std::string{point} + "\"");
  if (!(probability >= 0.0 && probability <= 1.0))
    throw std::invalid_argument("fault point \"" + std::string{point} +
                                "\": probability must be within 0..1");
  std::lock_guard<std::mutex> g{mtx_};
  if (probability > 0)
    p_[std::string{point}] = probability;
  else if (auto i = p_.find(point); i != p_.end())
    p_.erase(i);
  on_.store(seed_ != 0 && !p_.empty(), std::memory_order_relaxed);
}

bool fault_points::fire(std::string_view point) {
  if (!on_.load(std::memory_order_relaxed))
    return false;
  std::lock_guard<std::mutex> g{mtx_};
  auto i = p_.find(point);
  if (i == p_.end())
    return false;
  if (std::uniform_real_distribution<double>{0.0, 1.0}(rng_) >= i->second)
    return false;
  auto f = fired_.find(point);
  if (f == fired_.end())
    f = fired_.emplace(std::string{point}, 0).first;
  ++f->second;
  tally().add(point);
  return true;
}

uint64_t fault_points::fired(std::string_view point) const {
  std::lock_guard<std::mutex> g{mtx_};
  auto f = fired_.find(point);
  return f == fired_.end() ? 0 : f->second;
}

} // namespace prfaas

#pragma once

// Named, seeded fault-injection points in production code, all off by default.
//
// A fault point is a place in the code that asks `fire("name")` and, when told yes,
// does the fault (drops the frame, crashes the actor, ...). Whether it fires is drawn
// from a generator seeded by the deployment's `faults.seed` and the node's name and
// incarnation, so a simulation replays the same faults; with seed 0 or no points
// configured nothing ever fires and `fire` costs one relaxed load.
//
//   faults:
//     seed: 7
//     points: { transport.drop: 0.001, prefill.crash: 0.01 }
//
// The names a deployment may use are the inventory: the runtime's own (transport.*) and
// those each component registers beside its code, and plugins theirs, with
// PRFAAS_REGISTER_FAULT_POINTS (as PRFAAS_REGISTER_PROBES, probes.hpp); any other name
// is a config error.
// (The KV data plane's chunk faults live in `data_plane.faults`, config.hpp.)

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prfaas {

struct fault_config {
  uint64_t seed = 0;                    ///< 0 = off whatever the probabilities
  std::map<std::string, double> points; ///< name → probability per pass (0..1)

  bool operator==(const fault_config&) const = default;
};

struct fault_point_info {
  std::string_view name;
  std::string_view effect;
};

/// Every fault point registered: the runtime's, each linked component's, each plugin's.
std::vector<fault_point_info> fault_inventory();
bool is_fault_point(std::string_view name);
/// Adds fault points to the inventory (static initialisation, plugin load); entries
/// must outlive their use (string literals); a name registered already keeps its first.
void register_fault_points(std::span<const fault_point_info> points);

/// Process-wide: point → times fired since start (or the last reset), over all nodes.
std::map<std::string, uint64_t> fault_tally();
void reset_fault_tally();

class fault_points {
public:
  /// Off: nothing fires.
  fault_points() = default;
  /// `stream` separates the generators of nodes (and incarnations) of one deployment.
  fault_points(const fault_config& cfg, std::string_view stream);

  fault_points(const fault_points&) = delete;
  fault_points& operator=(const fault_points&) = delete;

  /// True when the fault at `point` should happen now. Thread-safe.
  bool fire(std::string_view point);
  /// Changes one point's probability while running (a chaos driver's schedule);
  /// 0 turns it off. Throws std::invalid_argument for a name not in the inventory.
  void set(std::string_view point, double probability);
  /// Re-seeds the generator (a chaos driver arming a deployment whose file has seed 0).
  void set_seed(uint64_t seed);
  /// How often `point` fired so far.
  uint64_t fired(std::string_view point) const;

private:
  mutable std::mutex mtx_;
  std::atomic<bool> on_{false};
  uint64_t seed_ = 0;
  uint64_t stream_ = 0;
  std::mt19937_64 rng_;
  std::map<std::string, double, std::less<>> p_;
  std::map<std::string, uint64_t, std::less<>> fired_;
};

} // namespace prfaas

/// Registers a component's fault points at static initialisation.
#define PRFAAS_REGISTER_FAULT_POINTS(id, ...)                                                      \
  namespace {                                                                                      \
  [[maybe_unused]] const bool prfaas_faults_##id = [] {                                            \
    static constexpr ::prfaas::fault_point_info entries[] = {__VA_ARGS__};                         \
    ::prfaas::register_fault_points(entries);                                                      \
    return true;                                                                                   \
  }();                                                                                             \
  }

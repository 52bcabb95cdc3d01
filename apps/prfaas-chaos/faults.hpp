#pragma once

// Applying and undoing each fault class on a running topology:
//   kill       SIGKILL (kill -9) the node; undone by starting it again (new incarnation)
//   pause      SIGSTOP; undone by SIGCONT
//   link_down  the named link's veth end in its first cluster's switch down (the peer
//              loses carrier too)
//   rate       tc tbf on both ends of the named link at the fault's rate; undone to
//              the link's rate. The link's bytes and the bucket's overlimits during the
//              fault are read from tc, so a cut that never bound is told apart.
//   blackhole  netns: the rules of nft_rules.hpp in the `from` node's cluster switch,
//              naming both ends (their collateral counters are read before removal).
//              Loopback: every node shares one namespace and address, so the rules
//              match the `to` nodes' ports and cut everyone's traffic to them.
//   fault_point  PUT /faults/<point> on the node's admin endpoint (nodes run with
//              --live-faults), back to 0 when undone (overlapping faults on one point:
//              the highest active probability). A node killed meanwhile restarts clean.
// Whatever is still applied when the injector is destroyed is undone.

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "nft_rules.hpp"
#include "scenario.hpp"
#include "topology.hpp"
#include "watcher.hpp"

namespace prfaas::chaos {

class injector {
public:
  /// `precise` false: the negative control's blackhole rules (nft_rules.hpp).
  explicit injector(topology& t, bool precise = true) : topo_(t), precise_(precise) {}
  ~injector();
  injector(const injector&) = delete;
  injector& operator=(const injector&) = delete;

  /// Applies fault `id`; throws std::runtime_error naming the command that failed.
  void apply(size_t id, const fault_spec& f);
  /// Undoes fault `id` if it is applied.
  void undo(size_t id);

  /// A netns blackhole's rule counters, read when it was undone.
  std::optional<rule_counts> counts(size_t id) const;
  /// A rate fault's link usage between apply and undo.
  std::optional<link_usage> usage(size_t id) const;
  /// How often a fault_point fault's point fired while it was applied (when both ends
  /// could be read; a node restarted meanwhile counts from its restart).
  std::optional<uint64_t> fired(size_t id) const;

private:
  struct tbf_stats {
    uint64_t bytes_a = 0, bytes_b = 0, overlimits = 0;
  };
  void blackhole(size_t id, const fault_spec& f, bool on);
  /// Sets the point to the highest active probability; how often it fired in the node so
  /// far (none when the node could not be reached).
  std::optional<uint64_t> arm_point(const std::string& node, const std::string& point);
  void blackhole_loopback(size_t id, const fault_spec& f, bool on);
  void must(const std::string& ns, std::vector<std::string> argv);
  void tbf(const link_place& l, const std::string& rate);
  /// Both ends' bytes sent and overlimits (summed).
  tbf_stats read_tbf(const link_place& l);

  topology& topo_;
  bool precise_;
  std::map<size_t, fault_spec> active_;
  std::map<size_t, std::optional<uint64_t>> fired_before_;
  std::map<size_t, uint64_t> fired_;
  std::map<size_t, std::string> rule_ns_; ///< blackhole id -> where its table is
  std::map<size_t, rule_counts> counts_;
  std::map<size_t, std::pair<std::chrono::steady_clock::time_point, tbf_stats>> rate_start_;
  std::map<size_t, link_usage> usage_;
};

/// True when the nft command is installed.
bool nft_installed();

/// Why `f` cannot run on `t` (a link fault on loopback, nft missing, nft on the
/// machine's own namespace), or empty.
std::string unsupported(const fault_spec& f, const topology& t);

} // namespace prfaas::chaos

#pragma once

// Applying and undoing each fault class on a running topology:
//   kill       SIGKILL (kill -9) the node; undone by starting it again (new incarnation)
//   pause      SIGSTOP; undone by SIGCONT
//   link_down  the veth end in the PrfaaS namespace down (the peer loses carrier too)
//   rate       tc tbf on both veth ends at the fault's rate; undone to the link's rate
//   blackhole  nftables rules in the `from` node's namespace dropping every packet of
//              its connections to the `to` nodes' control and data ports (both
//              directions of those TCP connections, so what `from` sends is lost while
//              what the `to` nodes send over their own connections still arrives);
//              `both_ways` adds the mirror rules. On loopback every node shares one
//              namespace, so the rules cut everyone's traffic to the `to` nodes.
// Whatever is still applied when the injector is destroyed is undone.

#include <map>
#include <string>

#include "scenario.hpp"
#include "topology.hpp"

namespace prfaas::chaos {

class injector {
public:
  explicit injector(topology& t) : topo_(t) {}
  ~injector();
  injector(const injector&) = delete;
  injector& operator=(const injector&) = delete;

  /// Applies fault `id`; throws std::runtime_error naming the command that failed.
  void apply(size_t id, const fault_spec& f);
  /// Undoes fault `id` if it is applied.
  void undo(size_t id);

private:
  void blackhole(size_t id, const fault_spec& f, bool on);
  void must(const std::string& ns, std::vector<std::string> argv);
  void tbf(const std::string& rate);

  topology& topo_;
  std::map<size_t, fault_spec> active_;
};

/// Why `f` cannot run on `t` (a link fault on loopback, nft missing, nft on the
/// machine's own namespace), or empty.
std::string unsupported(const fault_spec& f, const topology& t);

} // namespace prfaas::chaos

#pragma once

// The chaos sweep's fault schedule: the kinds of fault, the deployment's nodes by role,
// and the faults a seed draws (chaos_command.hpp runs and checks them).

#include <array>
#include <map>
#include <string>
#include <vector>

#include "chaos_command.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::sim {

// -- the fault schedule ---------------------------------------------------------------

enum class fault_kind {
  crash_prefill,   ///< kill a prefill node (PrfaaS or PD), restart it later
  crash_decode,    ///< kill a decode node mid-stream, restart it later
  crash_directory, ///< kill the KV directory's node, restart it later
  pause,           ///< a node hears and says nothing for a while, then is back with its old
                   ///< state (its actors keep running: a one-node partition; SIGSTOP itself
                   ///< is the live scenarios' pause-prefill)
  partition,       ///< the cross-cluster link down both ways
  one_way,         ///< the link down from the PrfaaS cluster to the PD cluster only
  flap,            ///< the link down and up again, three times
  degrade,         ///< the link at 1% of its rate
  message_loss,    ///< control frames lost and duplicated (2% each) on every node
  crash_points,    ///< prefill and decode workers and the directory crash on their fault points
  burst,           ///< 120 extra requests within a second, with long answers: admission
                   ///< control and deadlines
  slow_restart,    ///< a node's links slow to 400 ms; it crashes and is back before what
                   ///< was sent to it arrives; the links speed up again (reordering)
  crash_gateway,   ///< kill a gateway other than the observer: its clients see their
                   ///< connections drop; the other gateways' clients must not notice
  data_loss,       ///< 5% of the data plane's frames across the link lost, both ways (the
                   ///< real data plane re-sends; the fluid model loses capacity)
  data_corrupt,    ///< 5% of the chunks across the link arrive with a byte flipped (the
                   ///< real data plane's checksums catch them; no effect on the fluid model)
};

inline constexpr std::array all_kinds{
    fault_kind::crash_prefill, fault_kind::message_loss,    fault_kind::crash_decode,
    fault_kind::partition,     fault_kind::crash_directory, fault_kind::pause,
    fault_kind::crash_points,  fault_kind::one_way,         fault_kind::flap,
    fault_kind::degrade,       fault_kind::burst,           fault_kind::slow_restart,
    fault_kind::crash_gateway};
/// Drawn on top of a seed's faults, one per seed in turn (`chaos_options::data_faults`).
inline constexpr std::array data_kinds{fault_kind::data_loss, fault_kind::data_corrupt};

const char* name_of(fault_kind k);

struct fault {
  fault_kind kind;
  std::string target; ///< a node, or empty (the link, every node)
  double at_s = 0;
  double for_s = 0;
};

/// The deployment's nodes by role (the gateway's node is never faulted: it observes).
struct roles {
  std::vector<std::string> prefill, decode, directory, workers, prfaas, pd;
  std::vector<std::string> gateways; ///< every node with a gateway, the observer's first
  std::map<std::string, std::string> gateway_actor; ///< node → its gateway actor
  std::string prfaas_cluster, pd_cluster;
  double link_bps = 0;
};

/// Throws std::invalid_argument when the deployment lacks what the sweep needs.
roles roles_of(const deployment_config& dep, const std::string& gateway);

/// Seed `seed`'s faults: kinds in turn across the sweep (so a short sweep covers every
/// kind), targets, times and lengths drawn from the seed; then, with `o.data_faults` on
/// the real data plane, one data-plane fault (loss and corruption in turn), drawn after the others
/// so that they are the same with or without it.
std::vector<fault> schedule_of(const chaos_options& o, uint64_t seed, const roles& r,
                               double arrivals_s);

} // namespace prfaas::sim

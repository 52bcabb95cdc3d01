#pragma once

// The link monitor's contract: one monitor at each end of a cross-cluster link probes
// the other for RTT and liveness and publishes the link's state (LinkState, one-way) to
// its subscribers (the scheduler, scheduler.hpp).
//
//   monitor    --LinkProbe-->  peer monitor   request; LinkProbeReply
//   subscriber --Subscribe-->  monitor        request; the current LinkState (sent
//                                             one-way, the subscription still holds)

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/wire/link.pb.h"

namespace prfaas {

struct link_monitor_role {
  static constexpr std::string_view name = "link_monitor";
  using accepts = contract::accepts<contract::request<link::LinkProbe, link::LinkProbeReply>,
                                    contract::request<link::Subscribe, link::LinkState>>;
};

/// What a monitor needs of a subscriber (the scheduler, or any actor its `subscribers`
/// setting names): it takes the link's state one-way.
struct link_subscriber_role {
  static constexpr std::string_view name = "link subscriber";
  using accepts = contract::accepts<contract::one_way<link::LinkState>>;
};

} // namespace prfaas

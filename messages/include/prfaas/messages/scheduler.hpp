#pragma once

// The scheduler's contract: it places requests. For each it picks a prefill worker
// (in the PrfaaS cluster when the prompt's uncached length passes the threshold and the
// link is up, else in the PD cluster), a decode worker, and where a cached prefix can be
// pulled from (it asks the KV directory).
//
//   gateway      --RouteQuery-->  scheduler   request; RouteDecision
//   link monitor --LinkState-->   scheduler   one-way, on every change and publish tick

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/messages/link_monitor.hpp"
#include "prfaas/wire/link.pb.h"
#include "prfaas/wire/scheduler.pb.h"

namespace prfaas {

struct scheduler_role {
  static constexpr std::string_view name = "scheduler";
  using accepts = contract::accepts<contract::request<serving::RouteQuery, serving::RouteDecision>,
                                    contract::one_way<link::LinkState>>;
};

static_assert(
    contract::takes_one_way<scheduler_role, link::LinkState>,
    "a scheduler subscribes to link monitors: it takes what link_subscriber_role declares");

} // namespace prfaas

#pragma once

// The gateway's contract: the HTTP front end of a PD cluster. It drives each request
// (route query, decode order, prefill order, failover, resume) and turns the decode
// worker's token events into the client's response. What it takes from other nodes:
//
//   decode worker --TokenEvents/TokenEvent--> gateway
//       one-way while a stream runs (indexed: the gateway drops duplicates and detects
//       gaps); as a request for the event that ends a stream, so the decode worker
//       learns that the end arrived (the reply is an empty acknowledgement).

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/wire/gateway.pb.h"

namespace prfaas {

struct gateway_role {
  static constexpr std::string_view name = "gateway";
  using accepts = contract::accepts<contract::acked<serving::TokenEvents>,
                                    contract::acked<serving::TokenEvent>>;
};

} // namespace prfaas

#pragma once

// Contracts of the diagnostic actors (actors/examples): `echo` answers pings (the
// `pinger` probes peers with it; benchmarks measure round trips), `counter` counts what
// it is sent (the sink of the pipelined-throughput benchmark), `crashy` crashes on demand
// (supervision tests).

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/wire/examples.pb.h"

namespace prfaas {

struct echo_role {
  static constexpr std::string_view name = "echo";
  using accepts = contract::accepts<contract::request<examples::Ping, examples::Pong>>;
};

struct counter_role {
  static constexpr std::string_view name = "counter";
  using accepts = contract::accepts<contract::one_way<examples::Ping>,
                                    contract::request<examples::CountQuery, examples::CountReply>>;
};

/// A supervision test's victim: it throws on Crash.
struct crashy_role {
  static constexpr std::string_view name = "crashy";
  using accepts = contract::accepts<contract::one_way<examples::Crash>>;
};

} // namespace prfaas

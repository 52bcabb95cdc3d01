#pragma once

// Which PD cluster a prefill order serves, and its weight, for the prefill queue's fair
// queueing (prefill_queue.hpp) — where the deployment gives PD clusters shares.

#include <algorithm>
#include <cstdint>
#include <string>

#include "prfaas/runtime/config.hpp"

namespace prfaas::serving {

struct fair_share {
  std::string cluster; ///< "" = first come first served (no shares in the deployment)
  uint32_t weight = 1;
};

/// The PD cluster of `decode_node` (an order's KV goes there) and its
/// `clusters.<name>.share`, once any cluster sets a share (an unset one weighs 1);
/// without shares, {"", 1}: every order has one origin.
inline fair_share fair_share_of(const deployment_config& dep, const std::string& decode_node) {
  const bool shares = std::any_of(dep.clusters.begin(), dep.clusters.end(),
                                  [](auto& c) { return c.second.share > 0; });
  const auto* n = shares ? dep.find_node(decode_node) : nullptr;
  if (n == nullptr)
    return {};
  auto it = dep.clusters.find(n->cluster);
  return {n->cluster, it == dep.clusters.end() ? 1 : std::max<uint32_t>(1, it->second.share)};
}

} // namespace prfaas::serving

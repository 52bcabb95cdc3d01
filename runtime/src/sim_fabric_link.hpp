#pragma once

// One directed link of the simulated data fabric, shared by the fluid model
// (sim_data_plane.cpp) and the real data plane's frame pipes (sim_live_plane.cpp).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prfaas/runtime/sim_data_plane.hpp"

namespace prfaas {

struct sim_data_fabric::link {
  std::string from, to; ///< clusters
  bool shared = true;   ///< false: every transfer gets the full rate (intra-cluster)
  double capacity_bps = 0;
  double loss = 0;
  double corrupt = 0; ///< real data plane only
  std::vector<std::shared_ptr<flow>> flows;
  time_point updated{};
  uint64_t gen = 0;
  double delivered = 0;
  uint64_t messages = 0;
};

} // namespace prfaas

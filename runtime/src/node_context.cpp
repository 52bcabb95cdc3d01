#include "prfaas/runtime/node_context.hpp"

#include <xxhash.h>

namespace prfaas {

node_context::node_context(caf::actor_system& sys, const deployment_config& dep,
                           const node_config& node, uint64_t incarnation,
                           std::shared_ptr<messenger> m, transport_actor transport,
                           std::shared_ptr<metrics> metrics, logger_ptr log)
    : sys_(sys), dep_(dep), node_(node), incarnation_(incarnation), messenger_(std::move(m)),
      transport_(std::move(transport)), metrics_(std::move(metrics)), log_(std::move(log)) {
  uint64_t index = 0;
  while (index < dep.nodes.size() && dep.nodes[index].name != node.name)
    ++index;
  // Wall-clock incarnations are nanoseconds: their milliseconds tell two lives of a node
  // apart; explicit ones (simulations, tests) are small counters and are used as they are.
  const uint64_t life = incarnation >= 1'000'000'000'000ull ? incarnation / 1'000'000 : incarnation;
  id_prefix_ = ((index & 0xffff) << 48) | ((life & 0xffff) << 32);
}

uint64_t node_context::new_id() {
  return id_prefix_ | next_id_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t node_context::seed_for(const std::string& actor_name) const {
  auto key = node_.name + "/" + actor_name;
  return XXH3_64bits_withSeed(key.data(), key.size(), dep_.seed);
}

} // namespace prfaas

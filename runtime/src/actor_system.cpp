#include "prfaas/runtime/actor_system.hpp"

#include <caf/atom.hpp>

#include "prfaas/messages/type_ids.hpp"

namespace prfaas {

void configure_actor_system(caf::actor_system_config& cfg, size_t threads) {
  cfg.set("scheduler.max-threads", threads);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.add_message_types<caf::id_block::prfaas>();
}

} // namespace prfaas

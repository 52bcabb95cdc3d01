// What a plugin compiled against another prfaas exports: the PRFAAS_PLUGIN entry
// points, reporting a protocol version this node does not speak. The loader must
// refuse it before calling prfaas_plugin_register.

#include <cstdint>

#include "prfaas/messages/protocol.hpp"

namespace prfaas {
class actor_registry;
}

extern "C" __attribute__((visibility("default"))) uint32_t prfaas_plugin_protocol_version() {
  return prfaas::protocol_version + 1;
}

extern "C" __attribute__((visibility("default"))) void
prfaas_plugin_register(prfaas::actor_registry*) {}

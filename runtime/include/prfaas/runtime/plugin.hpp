#pragma once

// Out-of-tree actor types: a shared library built against the installed prfaas
// package (find_package(prfaas)) that a deployment lists under `plugins:`.
//
//   void register_types(prfaas::actor_registry& r) { r.add({...}); }
//   PRFAAS_PLUGIN(register_types)
//
// The loader refuses a library that cannot be opened, that is not a prfaas plugin,
// or that was built against another protocol version — before running any of it.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/runtime/actor_registry.hpp"

namespace prfaas {

class plugin_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Opens `path` and registers its actor types. The library stays loaded for the
/// life of the process. Throws plugin_error with the path and the reason.
void load_plugin(const std::string& path, actor_registry& reg);

} // namespace prfaas

#define PRFAAS_PLUGIN(register_fn)                                                                 \
  extern "C" __attribute__((visibility("default"))) uint32_t prfaas_plugin_protocol_version() {    \
    return ::prfaas::protocol_version;                                                             \
  }                                                                                                \
  extern "C" __attribute__((visibility("default"))) void prfaas_plugin_register(                   \
      ::prfaas::actor_registry* r) {                                                               \
    register_fn(*r);                                                                               \
  }

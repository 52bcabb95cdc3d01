#include "prfaas/runtime/plugin.hpp"

#include <dlfcn.h>

namespace prfaas {

void load_plugin(const std::string& path, actor_registry& reg) {
  // RTLD_LOCAL: a plugin's symbols stay its own; RTLD_NOW: unresolved symbols are
  // an error here, not a crash later.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw plugin_error("plugin " + path + ": cannot load: " + (why ? why : "unknown error"));
  }
  using version_fn = uint32_t (*)();
  using register_fn = void (*)(actor_registry*);
  auto version = reinterpret_cast<version_fn>(::dlsym(handle, "prfaas_plugin_protocol_version"));
  auto reg_fn = reinterpret_cast<register_fn>(::dlsym(handle, "prfaas_plugin_register"));
  if (!version || !reg_fn) {
    ::dlclose(handle);
    throw plugin_error("plugin " + path +
                       ": not a prfaas plugin (no PRFAAS_PLUGIN entry points: "
                       "prfaas_plugin_protocol_version / prfaas_plugin_register)");
  }
  auto v = version();
  if (v != protocol_version) {
    ::dlclose(handle);
    throw plugin_error("plugin " + path + ": built against protocol version " + std::to_string(v) +
                       ", this node speaks version " + std::to_string(protocol_version) +
                       "; rebuild it against this prfaas");
  }
  try {
    reg_fn(&reg);
  } catch (const std::exception& e) {
    throw plugin_error("plugin " + path + ": registration failed: " + e.what());
  }
  // Never dlclose a plugin whose types are registered: their factories live in it.
}

} // namespace prfaas

#pragma once

#include <cstdint>

namespace prfaas {

/// Version of the wire protocol and of the plugin interface. Bumped whenever an
/// envelope field changes meaning or the actor-registry ABI changes. A peer or a
/// plugin built against another version is refused.
inline constexpr uint32_t protocol_version = 1;

} // namespace prfaas

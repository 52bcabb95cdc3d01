#pragma once

// Per-node supervisor with OTP semantics: one-for-one restarts, restart policies
// permanent (always), transient (only after a crash) and temporary (never), and a
// restart intensity: more than `intensity` restarts within `period` escalates —
// the supervisor stops every child and exits with errc::escalated, which makes the
// node log why and exit non-zero. Children start in configuration order and stop
// in reverse order, each waited for before the next.

#include <functional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/log.hpp"
#include "prfaas/runtime/metrics.hpp"

namespace prfaas {

enum class restart_policy { permanent, transient, temporary };
restart_policy parse_restart_policy(const std::string& text);

struct child_spec {
  std::string name;
  std::string type;
  restart_policy restart = restart_policy::permanent;
  /// Spawns the child. May throw; a throw counts as a crash.
  std::function<caf::actor()> start;
};

/// A child as the supervisor sees it (for /health and tests).
struct child_status {
  std::string name;
  std::string type;
  bool running = false;
  uint32_t restarts = 0;
  caf::actor handle;
};

/// Called when a child (re)starts or stops, e.g. to keep the transport's directory current.
struct supervisor_hooks {
  std::function<void(const std::string& name, const caf::actor& child)> started;
  std::function<void(const std::string& name, const caf::actor& child)> stopped;
};

/// Spawns the supervisor; it starts all children at once. Query with
/// `(children_atom) -> std::vector<child_status>`. Stop with an exit message.
caf::actor spawn_supervisor(caf::actor_system& sys, std::vector<child_spec> children,
                            supervision_config cfg, supervisor_hooks hooks, metrics& m,
                            logger_ptr log);

} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<prfaas::child_status>)

// `crashy`: a deliberately fragile actor for supervision tests. It crashes (throws)
// on examples.Crash, optionally on its own after `crash_after`, and keeps a
// re-arming `tick` timer so that shutdown must stop it explicitly.

#include <stdexcept>

#include <caf/all.hpp>

#include "prfaas/messages/remote_actor.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/examples.pb.h"

namespace prfaas::examples_actors {

namespace {

struct crashy_state {
  static inline const char* name = "crashy";
  uint64_t ticks = 0;
};

caf::behavior crashy(caf::stateful_actor<crashy_state>* self, node_context* ctx, duration tick,
                     duration crash_after) {
  // A crash is this actor's job: turn the exception into its exit reason quietly
  // (CAF's default handler would print it to stderr); the supervisor logs it.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) -> caf::error {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return make_error(errc::remote_error, x.what());
    } catch (...) {
      return make_error(errc::remote_error, "unknown exception");
    }
  });
  if (tick > duration::zero())
    self->delayed_send(self, tick, caf::tick_atom_v);
  if (crash_after > duration::zero())
    self->delayed_send(self, crash_after, stop_atom_v);
  return {
      [self, ctx](remote_message& m) -> caf::result<remote_message> {
        return dispatch<crashy_role>(*ctx, m, [](examples::Crash& c) {
          throw std::runtime_error("crash requested: " + c.reason());
        });
      },
      [self, tick](caf::tick_atom) {
        ++self->state.ticks;
        self->delayed_send(self, tick, caf::tick_atom_v);
      },
      [](stop_atom) -> caf::result<void> { throw std::runtime_error("crash_after elapsed"); },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "crashy",
         .doc = "crashes on examples.Crash or after crash_after; ticks every tick",
         .params = {{"tick", param_kind::duration, "0ms", "re-arming timer period (0 = none)"},
                    {"crash_after", param_kind::duration, "0ms",
                     "crash on its own after this (0 = never)"}},
         .factory = [](node_context& ctx, const std::string&, const actor_params& p) {
           return ctx.system().spawn(crashy, &ctx, p.dur("tick"), p.dur("crash_after"));
         }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::examples_actors

// `echo`: answers examples.Ping with examples.Pong (same sequence and data, plus who
// answered). The smallest useful remote actor; tests and the transport benchmark use it.

#include <caf/all.hpp>

#include "prfaas/messages/remote_actor.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/examples.pb.h"

namespace prfaas::examples_actors {

namespace {

struct echo_state {
  static inline const char* name = "echo";
  uint64_t answered = 0;
};

remote_actor::behavior_type echo(remote_actor::stateful_pointer<echo_state> self,
                                 node_context* ctx) {
  return {
      [self, ctx](remote_message& msg) -> caf::result<remote_message> {
        return dispatch<echo_role>(*ctx, msg, [&](examples::Ping& ping, remote_message& m) {
          examples::Pong pong;
          pong.set_sequence(ping.sequence());
          pong.set_data(ping.data());
          pong.set_responder(m.destination.to_string());
          pong.set_incarnation(ctx->incarnation());
          ++self->state.answered;
          return with_bulk<examples::Pong>{pong, m.bulk}; // bulk frames are echoed back untouched
        });
      },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "echo",
         .doc = "answers examples.Ping with examples.Pong",
         .factory = [](node_context& ctx, const std::string&, const actor_params&) {
           return caf::actor_cast<caf::actor>(ctx.system().spawn(echo, &ctx));
         }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::examples_actors

// `counter`: counts the one-way Pings (and their bytes) it receives and answers
// examples.CountQuery. The sink of the pipelined-throughput benchmark.

#include <caf/all.hpp>

#include "prfaas/messages/remote_actor.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/examples.pb.h"

namespace prfaas::examples_actors {

namespace {

struct counter_state {
  static inline const char* name = "counter";
  uint64_t messages = 0;
  uint64_t bytes = 0;
};

remote_actor::behavior_type counter(remote_actor::stateful_pointer<counter_state> self,
                                    node_context* ctx) {
  return {
      [self, ctx](remote_message& msg) -> caf::result<remote_message> {
        return dispatch<counter_role>(
            *ctx, msg,
            [&](examples::CountQuery&) {
              examples::CountReply r;
              r.set_messages(self->state.messages);
              r.set_bytes(self->state.bytes);
              return r;
            },
            [&](examples::Ping&, remote_message& m) {
              ++self->state.messages;
              self->state.bytes += m.payload.size() + (m.bulk ? m.bulk->size() : 0);
            });
      },
  };
}

void register_types(actor_registry& r) {
  r.add({.name = "counter",
         .doc = "counts one-way messages; answers examples.CountQuery",
         .factory = [](node_context& ctx, const std::string&, const actor_params&) {
           return caf::actor_cast<caf::actor>(ctx.system().spawn(counter, &ctx));
         }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::examples_actors

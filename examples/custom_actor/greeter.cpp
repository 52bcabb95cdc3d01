// `greeter`: an actor type from outside the prfaas tree. It answers
// prfaas.examples.Ping with a Pong whose data is "<greeting>, <ping data>", so a
// caller can tell that the plugin answered and with which parameter.
//
// Everything a plugin needs is the installed prfaas headers and PRFAAS_PLUGIN: the
// node loads the library, checks its protocol version and calls register_types.
//
// Its contract, `greeter_role`, says what it answers; `dispatch` does not compile unless
// every message the contract declares has a handler, and callers that hold a
// `prfaas::remote_ref<custom_actor::greeter_role>` can send it nothing else.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/all.hpp>

#include <prfaas/messages/remote_actor.hpp>
#include <prfaas/runtime/actor_registry.hpp>
#include <prfaas/runtime/node_context.hpp>
#include <prfaas/runtime/plugin.hpp>
#include <prfaas/runtime/role.hpp>
#include <prfaas/wire/examples.pb.h>

namespace custom_actor {

/// What a greeter answers: Ping, with a Pong.
struct greeter_role {
  static constexpr std::string_view name = "greeter";
  using accepts = prfaas::contract::accepts<
      prfaas::contract::request<prfaas::examples::Ping, prfaas::examples::Pong>>;
};

namespace {

struct greeter_state {
  static inline const char* name = "greeter";
  std::string greeting; ///< from the deployment file; fixed for the actor's life
  uint64_t answered = 0;
};

prfaas::remote_actor::behavior_type
greeter(prfaas::remote_actor::stateful_pointer<greeter_state> self, prfaas::node_context* ctx,
        std::string greeting) {
  self->state.greeting = std::move(greeting);
  return {
      [self, ctx](prfaas::remote_message& msg) -> caf::result<prfaas::remote_message> {
        return prfaas::dispatch<greeter_role>(
            *ctx, msg, [&](prfaas::examples::Ping& ping, prfaas::remote_message& m) {
              prfaas::examples::Pong pong;
              pong.set_sequence(ping.sequence());
              pong.set_data(self->state.greeting + ", " + ping.data());
              pong.set_responder(m.destination.to_string());
              pong.set_incarnation(ctx->incarnation());
              ++self->state.answered;
              return pong;
            });
      },
  };
}

void register_types(prfaas::actor_registry& r) {
  r.add({"greeter",
         "answers prfaas.examples.Ping with a Pong carrying \"<greeting>, <data>\"",
         {{"greeting", prfaas::param_kind::string, "hello", "put in front of every answer"}},
         [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params& params) {
           return caf::actor_cast<caf::actor>(
               ctx.system().spawn(greeter, &ctx, params.str("greeting")));
         }});
}

} // namespace

} // namespace custom_actor

PRFAAS_PLUGIN(custom_actor::register_types)

// transport.inline_delivery on real ZeroMQ sockets: with it on, a request that finds
// its actor idle and nothing queued behind it is handled on the node's wire thread
// (no CAF worker woken); with it off, never. Either way every request is answered once
// and in order.

#include <pthread.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <caf/all.hpp>

#include "prfaas/messages/remote_actor.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/examples.pb.h"
#include "support/live_nodes.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
using namespace prfaas::test;

namespace {

/// Answers a Ping with a Pong whose `responder` is the name of the thread it ran on.
prfaas::remote_actor::behavior_type where(prfaas::remote_actor::pointer,
                                          prfaas::node_context* ctx) {
  return {
      [ctx](prfaas::remote_message& m) -> caf::result<prfaas::remote_message> {
        prfaas::examples::Ping ping;
        if (!prfaas::parse_remote(m, ping))
          return prfaas::unknown_type(*ctx, m);
        char name[32] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        prfaas::examples::Pong pong;
        pong.set_sequence(ping.sequence());
        pong.set_responder(name);
        return prfaas::make_reply(m, pong);
      },
  };
}

std::string deployment(const std::vector<uint16_t>& ports, bool inline_delivery) {
  return "deployment: inline\n"
         "failure_detector: { interval: 100ms, misses: 30, suspect_misses: 10 }\n"
         "transport: { inline_delivery: " +
         std::string{inline_delivery ? "true" : "false"} +
         " }\n"
         "nodes:\n" +
         node_entry("target", ports[0], ports[1],
                    "    actors: [ { type: where, name: where } ]\n") +
         node_entry("client", ports[2], ports[3]);
}

} // namespace

TEST_CASE("inline delivery runs an idle actor on the wire thread and only when enabled") {
  const bool inline_delivery = GENERATE(true, false);
  INFO("inline_delivery: " << inline_delivery);
  auto dep = prfaas::parse_deployment(deployment(free_ports(4), inline_delivery), "<inline>");
  REQUIRE(dep.transport.inline_delivery == inline_delivery);
  auto registry = prfaas::actor_registry::with_builtins();
  registry.add(
      {.name = "where",
       .doc = "answers a Ping with the name of the thread it ran on",
       .factory = [](prfaas::node_context& ctx, const std::string&, const prfaas::actor_params&) {
         return caf::actor_cast<caf::actor>(ctx.system().spawn(where, &ctx));
       }});
  live_nodes live{std::move(registry)};
  auto& target = live.start(dep, "target");
  auto& client = live.start(dep, "client");

  caf::scoped_actor self{live.system()};
  auto ask = [&](uint64_t seq, prfaas::duration budget) {
    prfaas::examples::Ping ping;
    ping.set_sequence(seq);
    std::optional<prfaas::examples::Pong> out;
    auto msg = prfaas::make_remote(prfaas::address{"client", "test"},
                                   prfaas::address{"target", "where"}, ping);
    prfaas::request_remote(self.ptr(), client.context(), msg, budget)
        .receive(
            [&](prfaas::remote_message& r) {
              prfaas::examples::Pong p;
              if (prfaas::parse_remote(r, p))
                out = p;
            },
            [](caf::error&) {});
    return out;
  };
  REQUIRE(eventually([&] { return ask(0, 500ms).has_value(); }, 20s, 100ms));

  // Sequential requests: each finds the actor idle. Heartbeats may queue behind one
  // now and then (that one goes to a worker), so inline delivery shows on most, not all.
  size_t on_wire = 0;
  const uint64_t n = 50;
  for (uint64_t seq = 1; seq <= n; ++seq) {
    auto pong = ask(seq, 10s);
    REQUIRE(pong.has_value());
    CHECK(pong->sequence() == seq);
    on_wire += pong->responder() == "prfaas.wire";
  }
  if (inline_delivery)
    CHECK(on_wire > n / 2);
  else
    CHECK(on_wire == 0);

  client.stop();
  target.stop();
}

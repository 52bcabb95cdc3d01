// `pinger`: every `period`, sends examples.Ping as a request to each target address
// and counts what happens to every request — a reply, or an error by kind — in
// Prometheus metrics. An end-to-end probe of the transport between nodes:
//   prfaas_pinger_requests_total{target}          requests started
//   prfaas_pinger_replies_total{target}           answered
//   prfaas_pinger_errors_total{target,code}       ended with an error
//   prfaas_pinger_in_flight{target}               started and not yet ended
// Every request ends exactly once, so requests = replies + errors + in_flight.

#include <sstream>

#include <caf/all.hpp>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/examples.pb.h"

namespace prfaas::examples_actors {

namespace {

struct target_probe {
  address addr;
  prometheus::Counter* requests = nullptr;
  prometheus::Counter* replies = nullptr;
  prometheus::Gauge* in_flight = nullptr;
};

struct pinger_state {
  static inline const char* name = "pinger";
  std::vector<target_probe> targets;
  uint64_t sequence = 0;
};

caf::behavior pinger(caf::stateful_actor<pinger_state>* self, node_context* ctx,
                     std::string self_name, std::vector<address> targets, duration period,
                     duration timeout) {
  auto& m = ctx->node_metrics();
  for (auto& t : targets) {
    auto label = prometheus::Labels{{"target", t.to_string()}};
    self->state.targets.push_back(
        {t, &m.counter("prfaas_pinger_requests_total", "Pings started", label),
         &m.counter("prfaas_pinger_replies_total", "Pings answered", label),
         &m.gauge("prfaas_pinger_in_flight", "Pings not yet ended", label)});
  }
  self->send(self, caf::tick_atom_v);
  return {
      [=](caf::tick_atom) {
        for (size_t i = 0; i < self->state.targets.size(); ++i) {
          auto& t = self->state.targets[i];
          examples::Ping ping;
          ping.set_sequence(++self->state.sequence);
          t.requests->Increment();
          t.in_flight->Increment();
          role_ref<echo_role>(*ctx, self_name, t.addr)
              .request(self, ping, timeout)
              .then(
                  [self, i](examples::Pong&) {
                    auto& t = self->state.targets[i];
                    t.replies->Increment();
                    t.in_flight->Decrement();
                  },
                  [self, ctx, i](caf::error& e) {
                    auto& t = self->state.targets[i];
                    ctx->node_metrics()
                        .counter(
                            "prfaas_pinger_errors_total", "Pings that ended with an error",
                            {{"target", t.addr.to_string()}, {"code", to_string(error_code(e))}})
                        .Increment();
                    t.in_flight->Decrement();
                  });
        }
        self->delayed_send(self, period, caf::tick_atom_v);
      },
  };
}

std::vector<address> parse_targets(const std::string& text, const std::string& where) {
  std::vector<address> out;
  std::istringstream in{text};
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty())
      continue;
    address a;
    if (!address::parse(item, a))
      throw config_error(where, "not a node/actor address: \"" + item + "\"");
    out.push_back(a);
  }
  return out;
}

void register_types(actor_registry& r) {
  r.add(
      {.name = "pinger",
       .doc = "probes targets with Ping requests and counts the outcomes",
       .params = {{"targets", param_kind::string, "", "comma-separated node/actor addresses", true},
                  {"period", param_kind::duration, "200ms", "time between rounds"},
                  {"timeout", param_kind::duration, "1s", "deadline of each request"}},
       .factory =
           [](node_context& ctx, const std::string& name, const actor_params& p) {
             auto targets = parse_targets(p.str("targets"), name + ".targets");
             return ctx.system().spawn(pinger, &ctx, name, targets, p.dur("period"),
                                       p.dur("timeout"));
           },
       .check =
           [](const std::string& path, const actor_params& p) {
             if (parse_targets(p.str("targets"), path + ".targets").empty())
               throw config_error(path + ".targets", "needs at least one node/actor address");
           }});
}

} // namespace

PRFAAS_REGISTER_ACTOR_TYPE(register_types);

} // namespace prfaas::examples_actors

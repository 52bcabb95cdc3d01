#pragma once

// How actors talk to actors on other nodes: protobuf messages to `node/actor`
// addresses, one-way or as requests with a timeout. Replies and errors come back
// through CAF's usual response handles, so the same code runs in real and virtual time.
//
//   auto msg = make_remote(ctx.local("me"), {"pd-0", "echo"}, ping);
//   request_remote(self, ctx, std::move(msg), 500ms).then(
//     [](remote_message& r) { examples::Pong pong; parse_remote(r, pong); ... },
//     [](caf::error& e) { ... describe(e) ... });

#include <chrono>
#include <string>

#include <caf/event_based_actor.hpp>

#include "prfaas/messages/remote_message.hpp"
#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/node_context.hpp"

namespace prfaas {

/// Builds a remote message carrying `payload` (a protobuf message).
template <class Proto>
remote_message make_remote(address from, address to, const Proto& payload, bulk_ptr bulk = {}) {
  remote_message m;
  m.source = std::move(from);
  m.destination = std::move(to);
  m.type = Proto::descriptor()->full_name();
  m.payload = payload.SerializeAsString();
  m.bulk = std::move(bulk);
  return m;
}

/// A reply to `request` carrying `payload`.
template <class Proto>
remote_message make_reply(const remote_message& request, const Proto& payload, bulk_ptr bulk = {}) {
  return make_remote(request.destination, request.source, payload, std::move(bulk));
}

/// True when `m` carries a `Proto` that parses.
template <class Proto> bool parse_remote(const remote_message& m, Proto& out) {
  return m.type == Proto::descriptor()->full_name() && out.ParseFromString(m.payload);
}

/// The error an actor returns for a payload type it does not handle; counted as
/// `prfaas_transport_dropped_total{reason="unknown_type"}`.
caf::error unknown_type(node_context& ctx, const remote_message& m);

/// One-way; never blocks. Local destinations skip the wire.
inline send_status send_remote(node_context& ctx, const remote_message& m) {
  return ctx.msgr().send_oneway(m);
}

/// Request with a deadline. The transport re-sends until `timeout` and always
/// answers: the reply, the remote error, peer_down or request_timeout.
template <class Self>
auto request_remote(Self* self, node_context& ctx, remote_message m,
                    std::chrono::nanoseconds timeout) {
  return request_remote(self, ctx.msgr(), std::move(m), timeout);
}

/// The same, given the messenger (e.g. from outside an actor with a scoped_actor).
template <class Self>
auto request_remote(Self* self, messenger& msgr, remote_message m,
                    std::chrono::nanoseconds timeout) {
  m.deadline = self->clock().now() + timeout;
  // Remote requests carry no CAF timeout: the messenger answers every one by its
  // deadline (and fails them all at once should the transport actor that runs its
  // timer ever stop); a CAF timeout per request would only wake CAF's clock thread
  // on the hot path. Local requests go straight to the local actor, so CAF's own
  // timeout bounds them.
  if (m.destination.node == msgr.node())
    return self->request(msgr.outbound(), caf::timespan{timeout}, std::move(m));
  return self->request(msgr.outbound(), caf::infinite, std::move(m));
}

} // namespace prfaas
